/*
 * errors.c - errors in the API's own format (Ollama {"error"}, OpenAI
 * {"error":{message,type,param,code}}), and the JSON dump they share with
 * the renderers.
 */
#include "gateway/api/internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/limits.h"
#include "common/utf8.h"

/* ---- errors ------------------------------------------------------------ */

void gw_api_error_set(struct gw_api_error *err, int status, const char *param,
		      const char *code, const char *fmt, ...)
{
	va_list ap;

	err->status = status;
	err->code = code;
	snprintf(err->param, sizeof(err->param), "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
}

void gw_api_error_model_not_found(struct gw_api_error *err, const char *name,
				  size_t len)
{
	char shown[65];
	size_t n = len > 64 ? 64 : len;

	/* cut on a character boundary so the message stays valid UTF-8 */
	n = cm_utf8_complete_prefix((const uint8_t *)name, n);
	memcpy(shown, name, n);
	shown[n] = '\0';
	gw_api_error_set(err, 404, "model", "model_not_found",
			 "model '%s' not found", shown);
}

void gw_api_error_from_worker(struct gw_api_error *err, uint16_t code,
			      const char *msg, size_t len)
{
	const char *oai = code == PROTO_E_TOO_LONG ? "context_length_exceeded" : NULL;
	const char *text;
	int status = 400;
	size_t n = 0;

	switch (code) {
	case PROTO_E_BAD_REQUEST: text = "invalid request parameters"; break;
	case PROTO_E_TOO_LONG: text = "the prompt and max tokens exceed the model's context"; break;
	case PROTO_E_NO_TEMPLATE: text = "the model has no chat template for these messages"; break;
	case PROTO_E_CONSTRAINT: text = "the output constraint cannot be used"; break;
	case PROTO_E_OVERLOADED: status = 503; text = "the worker is overloaded; retry later"; break;
	case PROTO_E_DRAINING: status = 503; text = "the worker is draining; retry later"; break;
	default: status = 502; text = "the model worker failed to complete the request"; break;
	}
	if (status != 400 || !msg || len == 0) {
		gw_api_error_set(err, status, NULL, oai, "%s", text);
		return;
	}
	if (len >= sizeof(err->message)) {
		/* cut on a character boundary: the message stays UTF-8 */
		len = sizeof(err->message) - 1;
		while (len > 0 && ((unsigned char)msg[len] & 0xC0) == 0x80)
			len--;
	}
	gw_api_error_set(err, 400, NULL, oai, "%.*s", (int)len, msg);
	/* a field name: letters, digits, '_', '.', '[', ']' up to ": " */
	while (n < len && n < sizeof(err->param) - 1 && msg[n] &&
	       strchr("abcdefghijklmnopqrstuvwxyz0123456789_.[]", msg[n]))
		n++;
	if (n > 0 && n + 1 < len && msg[n] == ':' && msg[n + 1] == ' ') {
		memcpy(err->param, msg, n);
		err->param[n] = '\0';
	}
}

static const char *openai_type(int status)
{
	switch (status) {
	case 401: return "authentication_error";
	case 403: return "permission_error";
	case 404: return "not_found_error";
	case 429: return "rate_limit_error";
	default: return status >= 500 ? "server_error" : "invalid_request_error";
	}
}

enum cm_status gw_api_dump_json(struct cm_buf *out, json_t *j)
{
	size_t n;
	enum cm_status st;

	if (!j)
		return CM_ENOMEM;
	n = json_dumpb(j, NULL, 0, JSON_COMPACT);
	if (n == 0) {
		json_decref(j);
		return CM_EINVAL;
	}
	st = cm_buf_reserve(out, n);
	if (st == CM_OK) {
		json_dumpb(j, (char *)cm_buf_tail(out), n, JSON_COMPACT);
		cm_buf_commit(out, n);
	}
	json_decref(j);
	return st;
}

/* json_string of text we produced or validated; invalid UTF-8 -> U+FFFD-free "" */
json_t *gw_api_jstr(const char *s)
{
	json_t *j = json_string(s ? s : "");

	return j ? j : json_string("");
}

json_t *gw_api_error_object(enum gw_api_style style, const struct gw_api_error *e)
{
	json_t *o = json_object(), *in;

	if (!o)
		return NULL;
	if (style == GW_STYLE_OLLAMA) {
		json_object_set_new(o, "error", gw_api_jstr(e->message));
		return o;
	}
	in = json_object();
	json_object_set_new(in, "message", gw_api_jstr(e->message));
	json_object_set_new(in, "type", json_string(openai_type(e->status)));
	json_object_set_new(in, "param", e->param[0] ? gw_api_jstr(e->param) : json_null());
	json_object_set_new(in, "code", e->code ? gw_api_jstr(e->code) : json_null());
	json_object_set_new(o, "error", in);
	return o;
}

enum cm_status gw_api_render_error(struct cm_buf *out, enum gw_api_style style,
				   const struct gw_api_error *err)
{
	return gw_api_dump_json(out, gw_api_error_object(style, err));
}

enum cm_status gw_api_http_error(int status, const char *message,
				 const char *path, struct cm_buf *body,
				 const char **content_type, void *ctx)
{
	struct gw_api_error e;

	/* a 401 from the key check before a body reads as the dispatcher's */
	gw_api_error_set(&e, status, NULL, status == 401 ? "invalid_api_key" : NULL, "%s", message);
	*content_type = GW_API_CT_JSON;
	return gw_api_render_error(body, gw_paths_style(path), &e);
}

enum cm_status gw_api_render_manage_forbidden(struct cm_buf *out, const char *op)
{
	struct gw_api_error e;

	gw_api_error_set(&e, 403, NULL, NULL,
			 "model management (%s) is not available through the API: "
			 "models are installed and configured by the operator",
			 op ? op : "this operation");
	return gw_api_render_error(out, GW_STYLE_OLLAMA, &e);
}
