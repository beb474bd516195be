#include "worker/chat.h"
const struct wk_chat_template *wk_chat_template_by_name(const char *name) { (void)name; return NULL; }
const char *wk_chat_template_names(void) { return "(none yet)"; }
const struct wk_chat_template *wk_chat_template_detect(const char *tmpl, size_t len) { (void)tmpl; (void)len; return NULL; }
enum cm_status wk_chat_encode(const struct wk_chat_template *t, const struct wk_tok *tok,
			      const struct wk_chat_msg *msgs, size_t n, int32_t *out, size_t cap,
			      size_t *n_out, char *err, size_t err_len)
{ (void)t; (void)tok; (void)msgs; (void)n; (void)out; (void)cap; (void)n_out; (void)err; (void)err_len; return CM_EUNSUPPORTED; }
