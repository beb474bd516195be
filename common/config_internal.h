/*
 * config_internal.h - what the files of the configuration loader share:
 * config.c (defaults, freeing, applying JSON, loading), config_msg.c
 * (messages that name the key, key paths, suggestions for unknown names)
 * and config_doc.c (the Markdown key reference).  Included by those three
 * only.
 */
#ifndef SLUICE_COMMON_CONFIG_INTERNAL_H
#define SLUICE_COMMON_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/config.h"

#define CFG_PATH_MAX 256     /* longest key path shown in a message */
#define CFG_SHOW_BYTES 40    /* longest string value echoed in a message */
#define CFG_SUGGEST_MAX 64   /* longest name considered for suggestions */

struct cfg_ctx {
	char *err;
	size_t errlen;
	const char *origin;  /* file path prefix for messages, or NULL */
	char path[CFG_PATH_MAX];
	size_t plen;
};

/* The message, prefixed with the file, into the caller's buffer. */
void cm_cfg_err(struct cfg_ctx *c, const char *fmt, ...) CM_PRINTF(2, 3);
/* s[0..len) printable, escaped, truncated to CFG_SHOW_BYTES, quoted. */
void cm_cfg_quote(const char *s, size_t len, char *out, size_t n);
/* Shortest text that reads back as d. */
void cm_cfg_fmt_double(double d, char *out, size_t n);
/* "found ..." text of a JSON value (flags: the key's CM_CFG_F_*). */
void cm_cfg_describe(const json_t *v, unsigned flags, char *out, size_t n);
/* Bytes and durations in the units the files take ("64 MiB", "30 s"). */
void cm_cfg_fmt_size(uint64_t v, char *out, size_t n);
void cm_cfg_fmt_duration(int64_t ms, char *out, size_t n);
/* "expected ..." text of a key: its type and bounds. */
void cm_cfg_expected(const struct cm_cfg_key *k, char *out, size_t n);
/* "<path>: expected <what>, found <what>". */
void cm_cfg_err_value(struct cfg_ctx *c, const struct cm_cfg_key *k,
			  const json_t *v);
/* Appends to the key path; returns the previous length for cm_cfg_path_pop. */
size_t cm_cfg_path_push(struct cfg_ctx *c, const char *fmt, ...) CM_PRINTF(2, 3);
void cm_cfg_path_pop(struct cfg_ctx *c, size_t old);
/* Suggestions: keeps in *best the candidate nearest to s (edit distance). */
void cm_cfg_consider(const char *s, const char *cand, const char **best,
			 size_t *best_d);
void cm_cfg_fmt_suggestion(const char *best, char *out, size_t n);

#endif
