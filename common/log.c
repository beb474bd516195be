/*
 * log.c - JSON-lines logging (see log.h).  Global state is set once by
 * cm_log_setup() in main() before threads start and only read afterwards.
 */
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"

enum cm_log_level cm_log_min_level = CM_LOG_INFO;
static int log_fd = 2;
static char log_comp[32] = "sluice";

static const char *level_names[] = { "debug", "info", "warn", "error", "off" };

void cm_log_setup(enum cm_log_level min_level, int fd, const char *component)
{
	cm_log_min_level = min_level;
	log_fd = fd;
	if (component)
		snprintf(log_comp, sizeof(log_comp), "%s", component);
}

enum cm_status cm_log_level_parse(const char *s, enum cm_log_level *out)
{
	for (int i = 0; i <= CM_LOG_OFF; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum cm_log_level)i;
			return CM_OK;
		}
	}
	return CM_EINVAL;
}

const char *cm_log_level_str(enum cm_log_level level)
{
	if ((int)level < 0 || level > CM_LOG_OFF)
		return "?";
	return level_names[level];
}

/* Reserve room for the closing `,"trunc":true}\n`. */
#define LOG_TAIL_RESERVE 20

static void put_raw(struct cm_log_rec *r, const char *s, size_t n)
{
	size_t room = CM_LOG_LINE_MAX - LOG_TAIL_RESERVE - r->len;

	if (r->truncated)
		return;
	if (n > room) {
		r->truncated = 1;
		return;
	}
	memcpy(r->line + r->len, s, n);
	r->len += n;
}

static void put_escaped(struct cm_log_rec *r, const char *s, size_t n)
{
	char tmp[8];

	put_raw(r, "\"", 1);
	for (size_t i = 0; i < n && !r->truncated; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			tmp[0] = '\\';
			tmp[1] = (char)c;
			put_raw(r, tmp, 2);
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(tmp, sizeof(tmp), "\\u%04x", c);
			put_raw(r, tmp, 6);
		} else {
			put_raw(r, (const char *)&c, 1);
		}
	}
	put_raw(r, "\"", 1);
}

/*
 * Starts a field and returns the length before it: when the field does not
 * fit, end_field() drops it whole so that the line stays valid JSON.
 */
static size_t put_key(struct cm_log_rec *r, const char *key)
{
	size_t mark = r->len;

	put_raw(r, ",", 1);
	put_escaped(r, key, strlen(key));
	put_raw(r, ":", 1);
	return mark;
}

static void end_field(struct cm_log_rec *r, size_t mark)
{
	if (r->truncated)
		r->len = mark;
}

void cm_log_begin(struct cm_log_rec *r, enum cm_log_level level,
		  const char *event)
{
	char ts[32];

	r->level = level;
	r->len = 0;
	r->truncated = 0;
	if (!cm_log_enabled(level))
		return;
	cm_wall_iso8601(cm_wall_ns(), ts);
	put_raw(r, "{\"ts\":\"", 7);
	put_raw(r, ts, strlen(ts));
	put_raw(r, "\",\"level\":\"", 11);
	put_raw(r, level_names[level], strlen(level_names[level]));
	put_raw(r, "\"", 1);
	put_key(r, "comp");
	put_escaped(r, log_comp, strlen(log_comp));
	put_key(r, "event");
	put_escaped(r, event, strlen(event));
}

void cm_log_strn(struct cm_log_rec *r, const char *key, const char *val,
		 size_t len)
{
	if (!cm_log_enabled(r->level))
		return;
	size_t mark;

	mark = put_key(r, key);
	if (!val)
		put_raw(r, "null", 4);
	else
		put_escaped(r, val, len);
	end_field(r, mark);
}

void cm_log_str(struct cm_log_rec *r, const char *key, const char *val)
{
	cm_log_strn(r, key, val, val ? strlen(val) : 0);
}

/* One field whose value is already JSON text (a number, null). */
static void put_json_field(struct cm_log_rec *r, const char *key, const char *text, int n)
{
	size_t mark;

	if (n < 0)
		return;
	mark = put_key(r, key);
	put_raw(r, text, (size_t)n);
	end_field(r, mark);
}

void cm_log_i64(struct cm_log_rec *r, const char *key, int64_t val)
{
	char tmp[32];

	if (cm_log_enabled(r->level))
		put_json_field(r, key, tmp, snprintf(tmp, sizeof(tmp), "%" PRId64, val));
}

void cm_log_u64(struct cm_log_rec *r, const char *key, uint64_t val)
{
	char tmp[32];

	if (cm_log_enabled(r->level))
		put_json_field(r, key, tmp, snprintf(tmp, sizeof(tmp), "%" PRIu64, val));
}

void cm_log_f64(struct cm_log_rec *r, const char *key, double val)
{
	char tmp[40];

	if (!cm_log_enabled(r->level))
		return;
	if (!isfinite(val))
		put_json_field(r, key, "null", 4);
	else
		put_json_field(r, key, tmp, snprintf(tmp, sizeof(tmp), "%.6g", val));
}

void cm_log_bool(struct cm_log_rec *r, const char *key, int val)
{
	size_t mark;

	if (!cm_log_enabled(r->level))
		return;
	mark = put_key(r, key);
	if (val)
		put_raw(r, "true", 4);
	else
		put_raw(r, "false", 5);
	end_field(r, mark);
}

void cm_log_end(struct cm_log_rec *r)
{
	const char *p;
	size_t left;

	if (!cm_log_enabled(r->level))
		return;
	if (r->truncated) {
		memcpy(r->line + r->len, ",\"trunc\":true", 13);
		r->len += 13;
	}
	r->line[r->len++] = '}';
	r->line[r->len++] = '\n';
	p = r->line;
	left = r->len;
	while (left > 0) {
		ssize_t n = write(log_fd, p, left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* nowhere to report a failing log */
		p += n;
		left -= (size_t)n;
	}
}

void cm_vlogf(enum cm_log_level level, const char *event, const char *fmt,
	      va_list ap)
{
	struct cm_log_rec r;
	char msg[1024];
	int n;

	if (!cm_log_enabled(level))
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	cm_log_begin(&r, level, event);
	cm_log_strn(&r, "msg", msg, (size_t)n);
	cm_log_end(&r);
}

void cm_logf(enum cm_log_level level, const char *event, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cm_vlogf(level, event, fmt, ap);
	va_end(ap);
}
