/*
 * config_doc.c - the Markdown key reference of configuration sections
 * (docs/configuration.md is generated from it: `config-doc`).
 */
#include "common/config_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/limits.h"

/* ===================================================================
 * Markdown documentation
 * =================================================================== */

static const char *cfg_type_name(enum cm_cfg_type t)
{
	switch (t) {
	case CM_CFG_T_BOOL: return "bool";
	case CM_CFG_T_INT: return "integer";
	case CM_CFG_T_DOUBLE: return "number";
	case CM_CFG_T_STRING: return "string";
	case CM_CFG_T_ENUM: return "enum";
	case CM_CFG_T_SIZE: return "size";
	case CM_CFG_T_DURATION: return "duration";
	case CM_CFG_T_STRLIST: return "list of strings";
	case CM_CFG_T_OBJLIST: return "list of objects";
	case CM_CFG_T_OBJECT: return "object";
	}
	return "?";
}

/* Appends text with '|' escaped and newlines folded (one table cell). */
static enum cm_status cfg_md_cell(struct cm_buf *out, const char *s)
{
	enum cm_status st = CM_OK;

	for (; s && *s && st == CM_OK; s++) {
		if (*s == '|')
			st = cm_buf_append(out, "\\|", 2);
		else if (*s == '\n' || *s == '\r')
			st = cm_buf_append(out, " ", 1);
		else
			st = cm_buf_append(out, s, 1);
	}
	return st;
}

static enum cm_status cfg_md_default(const struct cm_cfg_key *k,
				     struct cm_buf *out)
{
	char tmp[64];

	if (k->flags & CM_CFG_F_REQUIRED)
		return cm_buf_append_str(out, "required");
	switch (k->type) {
	case CM_CFG_T_BOOL:
		return cm_buf_append_str(out, k->def_i ? "`true`" : "`false`");
	case CM_CFG_T_INT:
		return cm_buf_printf(out, "`%" PRId64 "`", k->def_i);
	case CM_CFG_T_DOUBLE:
		cm_cfg_fmt_double(k->def_d, tmp, sizeof(tmp));
		return cm_buf_printf(out, "`%s`", tmp);
	case CM_CFG_T_STRING:
		if (!k->def_s)
			return cm_buf_append_str(out, "unset");
		if (k->flags & CM_CFG_F_SECRET)
			return cm_buf_append_str(out, "(secret)");
		return cm_buf_printf(out, "`\"%s\"`", k->def_s);
	case CM_CFG_T_ENUM:
		if (k->def_i < 0 || (size_t)k->def_i >= k->n_choices)
			return CM_EINVAL; /* a broken table: a bug in a module */
		return cm_buf_printf(out, "`\"%s\"`", k->choices[k->def_i]);
	case CM_CFG_T_SIZE:
		cm_cfg_fmt_size((uint64_t)k->def_i, tmp, sizeof(tmp));
		return cm_buf_printf(out, "`%s`", tmp);
	case CM_CFG_T_DURATION:
		cm_cfg_fmt_duration(k->def_i, tmp, sizeof(tmp));
		return cm_buf_printf(out, "`%s`", tmp);
	case CM_CFG_T_STRLIST: {
		enum cm_status s = cm_buf_append_str(out, "`[");

		for (size_t i = 0; s == CM_OK && k->def_list && k->def_list[i];
		     i++)
			s = cm_buf_printf(out, "%s\"%s\"", i ? ", " : "",
					  k->def_list[i]);
		return s == CM_OK ? cm_buf_append_str(out, "]`") : s;
	}
	case CM_CFG_T_OBJLIST:
		return cm_buf_append_str(out, "`[]`");
	case CM_CFG_T_OBJECT:
		return cm_buf_append_str(out, "see below");
	}
	return CM_OK;
}

static enum cm_status cfg_md_bounds(const struct cm_cfg_key *k,
				    struct cm_buf *out)
{
	char lo[32], hi[32];
	enum cm_status s = CM_OK;

	switch (k->type) {
	case CM_CFG_T_INT:
		return cm_buf_printf(out, "%" PRId64 " to %" PRId64, k->min_i,
				     k->max_i);
	case CM_CFG_T_DOUBLE:
		cm_cfg_fmt_double(k->min_d, lo, sizeof(lo));
		cm_cfg_fmt_double(k->max_d, hi, sizeof(hi));
		return cm_buf_printf(out, "%s to %s", lo, hi);
	case CM_CFG_T_SIZE:
		cm_cfg_fmt_size((uint64_t)k->min_i, lo, sizeof(lo));
		cm_cfg_fmt_size((uint64_t)k->max_i, hi, sizeof(hi));
		return cm_buf_printf(out, "%s to %s", lo, hi);
	case CM_CFG_T_DURATION:
		cm_cfg_fmt_duration(k->min_i, lo, sizeof(lo));
		cm_cfg_fmt_duration(k->max_i, hi, sizeof(hi));
		return cm_buf_printf(out, "%s to %s", lo, hi);
	case CM_CFG_T_STRING:
		return cm_buf_printf(out, "at most %zu bytes", k->max_len);
	case CM_CFG_T_ENUM:
		for (size_t i = 0; s == CM_OK && i < k->n_choices; i++)
			s = cm_buf_printf(out, "%s`\"%s\"`", i ? ", " : "",
					  k->choices[i]);
		return s;
	case CM_CFG_T_STRLIST:
		return cm_buf_printf(out, "at most %zu, each at most %zu bytes",
				     k->max_count, k->max_len);
	case CM_CFG_T_OBJLIST:
		return cm_buf_printf(out, "at most %zu", k->max_count);
	case CM_CFG_T_BOOL:
	case CM_CFG_T_OBJECT:
		break;
	}
	return CM_OK;
}

static enum cm_status cfg_md_rows(const struct cm_cfg_section *sec,
				  const char *prefix, struct cm_buf *out,
				  int depth)
{
	enum cm_status s = CM_OK;

	if (depth > 8)
		return CM_EINVAL; /* a cyclic table: a bug in a module */
	for (size_t i = 0; s == CM_OK && i < sec->n_keys; i++) {
		const struct cm_cfg_key *k = &sec->keys[i];

		s = cm_buf_printf(out, "| `%s%s` | %s | ", prefix, k->name,
				  cfg_type_name(k->type));
		if (s == CM_OK)
			s = cfg_md_default(k, out);
		if (s == CM_OK)
			s = cm_buf_append_str(out, " | ");
		if (s == CM_OK)
			s = cfg_md_bounds(k, out);
		if (s == CM_OK)
			s = cm_buf_append_str(out, " | ");
		if (s == CM_OK)
			s = cfg_md_cell(out, k->doc);
		if (s == CM_OK)
			s = cm_buf_append_str(out, " |\n");
		if (s == CM_OK && (k->type == CM_CFG_T_OBJECT ||
				   k->type == CM_CFG_T_OBJLIST)) {
			char sub[CFG_PATH_MAX];

			snprintf(sub, sizeof(sub), "%s%s%s", prefix, k->name,
				 k->type == CM_CFG_T_OBJECT ? "." : "[].");
			s = cfg_md_rows(k->sub, sub, out, depth + 1);
		}
	}
	return s;
}

enum cm_status cm_cfg_doc_markdown(const struct cm_cfg_section *sec,
				   struct cm_buf *out)
{
	enum cm_status s;

	s = cm_buf_printf(out, "### Section `%s`\n\n", sec->name);
	if (s == CM_OK && sec->doc)
		s = cm_buf_printf(out, "%s\n\n", sec->doc);
	if (s == CM_OK)
		s = cm_buf_append_str(out,
				      "| Key | Type | Default | Bounds | Description |\n"
				      "| --- | --- | --- | --- | --- |\n");
	if (s == CM_OK)
		s = cfg_md_rows(sec, "", out, 0);
	if (s == CM_OK)
		s = cm_buf_append_str(out, "\n");
	return s;
}
