/*
 * log.h - JSON-lines logging with levels.
 *
 * One line per record: {"ts":"…","level":"info","comp":"worker",
 * "event":"…", …fields}.  Records are built in a fixed buffer on the
 * caller's stack (no allocation) and written with one write(2), so lines
 * from several threads never interleave.  Check cm_log_enabled() before
 * building an expensive record; the helpers check it too.
 *
 * Policy (BRIEF "Security posture"): never log prompt or completion text,
 * never a key or secret.  Log ids, counts, durations, status.  Values are
 * JSON-escaped; an over-long record is truncated and marked "trunc":true.
 */
#ifndef SLUICE_COMMON_LOG_H
#define SLUICE_COMMON_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

enum cm_log_level {
	CM_LOG_DEBUG = 0,
	CM_LOG_INFO = 1,
	CM_LOG_WARN = 2,
	CM_LOG_ERROR = 3,
	CM_LOG_OFF = 4,
};

#define CM_LOG_LINE_MAX 4096

struct cm_log_rec {
	enum cm_log_level level;
	size_t len;
	int truncated;
	char line[CM_LOG_LINE_MAX];
};

/* Process-wide: minimum level, output fd (default 2), component name. */
void cm_log_setup(enum cm_log_level min_level, int fd, const char *component);
/* Parses "debug", "info", "warn", "error", "off"; CM_EINVAL otherwise. */
enum cm_status cm_log_level_parse(const char *s, enum cm_log_level *out) CM_WUR;
const char *cm_log_level_str(enum cm_log_level level);

extern enum cm_log_level cm_log_min_level;

static inline int cm_log_enabled(enum cm_log_level level)
{
	return level >= cm_log_min_level;
}

/* Starts a record (writes ts, level, comp, event). */
void cm_log_begin(struct cm_log_rec *r, enum cm_log_level level,
		  const char *event);
void cm_log_str(struct cm_log_rec *r, const char *key, const char *val);
void cm_log_strn(struct cm_log_rec *r, const char *key, const char *val,
		 size_t len);
void cm_log_i64(struct cm_log_rec *r, const char *key, int64_t val);
void cm_log_u64(struct cm_log_rec *r, const char *key, uint64_t val);
void cm_log_f64(struct cm_log_rec *r, const char *key, double val);
void cm_log_bool(struct cm_log_rec *r, const char *key, int val);
/* Finishes the record and writes it. */
void cm_log_end(struct cm_log_rec *r);

/*
 * One-shot record with a formatted "msg" field.  The message is for
 * operators: file names, keys of config, counts; never request text.
 */
void cm_logf(enum cm_log_level level, const char *event, const char *fmt, ...)
	CM_PRINTF(3, 4);
void cm_vlogf(enum cm_log_level level, const char *event, const char *fmt,
	      va_list ap);

#endif
