/*
 * config.h - declarative configuration: each module declares a table of
 * keys, this loader fills the module's struct from a JSON file.
 *
 * A module owns a plain C struct and describes it with one section:
 *
 *     struct gw_http_cfg { uint64_t body_bytes; int64_t read_timeout_ms; };
 *     static const struct cm_cfg_key gw_http_keys[] = {
 *         CM_CFG_SIZE(struct gw_http_cfg, body_bytes, CM_LIM_HTTP_BODY_BYTES,
 *                     1024, 1073741824, "Largest request body accepted."),
 *         CM_CFG_DURATION(struct gw_http_cfg, read_timeout_ms, 10000, 1,
 *                         600000, "Time allowed to read a request."),
 *     };
 *     const struct cm_cfg_section gw_http_section =
 *         CM_CFG_SECTION("http", struct gw_http_cfg, gw_http_keys,
 *                        "HTTP listener limits.");
 *
 * A configuration file is one JSON object whose members are section names:
 * {"http": {"body_bytes": "8MiB"}, "worker": {...}}.  Sections and keys
 * that the file leaves out keep their defaults.  Unknown sections, unknown
 * keys, duplicate keys, wrong types and out-of-range values are errors, and
 * every error message names the key by its full path, what was expected and
 * what was found:
 *
 *     http.body_bytes: expected a size in [1KiB, 1GiB], found 5
 *     gateway.workers[2].socket: expected a string, found true
 *     unknown key "bodybytes" in section "http" (did you mean "body_bytes"?)
 *     config.json:3:14: JSON syntax error: ...
 *
 * Field types (the CM_CFG_* macros check them at compile time):
 *     BOOL      bool
 *     INT       int64_t, inclusive bounds
 *     DOUBLE    double, inclusive bounds; JSON integers accepted
 *     STRING    char * (owned, NUL-terminated, NULL when unset), max bytes
 *     ENUM      int: index into a fixed list of strings
 *     SIZE      uint64_t bytes; JSON integer or "512MiB", "2GiB", "64KB" ...
 *     DURATION  int64_t milliseconds; JSON integer (ms) or "500ms", "10s",
 *               "2m", "1h"
 *     STRLIST   struct cm_cfg_strlist (owned strings), max count, max bytes
 *     OBJLIST   struct cm_cfg_objlist: array of structs described by a
 *               sub-section, max count
 *     OBJECT    a nested struct embedded in the parent, described by a
 *               sub-section (path "gateway.limits.body_bytes")
 *
 * Ownership: cm_cfg_defaults() and a successful load allocate (strings and
 * lists); cm_cfg_free() releases them.  A failed load leaves every struct
 * zeroed with nothing to free.
 * Thread: none of this is thread-safe; load at start, before threads exist.
 * Secrets: keys flagged CM_CFG_F_SECRET never have their found value echoed
 * in an error message.
 */
#ifndef SLUICE_COMMON_CONFIG_H
#define SLUICE_COMMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/status.h"

enum cm_cfg_type {
	CM_CFG_T_BOOL,
	CM_CFG_T_INT,
	CM_CFG_T_DOUBLE,
	CM_CFG_T_STRING,
	CM_CFG_T_ENUM,
	CM_CFG_T_SIZE,
	CM_CFG_T_DURATION,
	CM_CFG_T_STRLIST,
	CM_CFG_T_OBJLIST,
	CM_CFG_T_OBJECT,
};

/* Key flags. */
#define CM_CFG_F_REQUIRED 0x1u /* must be present in the file */
#define CM_CFG_F_SECRET 0x2u   /* never echo the value in errors or docs */

struct cm_cfg_section;

struct cm_cfg_key {
	const char *name;       /* JSON member name */
	enum cm_cfg_type type;
	size_t offset;          /* of the field in the section's struct */
	unsigned flags;         /* CM_CFG_F_* */
	const char *doc;        /* one or two sentences, Markdown allowed */
	/* defaults: def_i for BOOL/INT/ENUM (index)/SIZE/DURATION, def_d for
	 * DOUBLE, def_s for STRING (NULL: unset), def_list for STRLIST
	 * (NULL-terminated, NULL: empty) */
	int64_t def_i;
	double def_d;
	const char *def_s;
	const char *const *def_list;
	/* bounds: INT/SIZE/DURATION (inclusive), DOUBLE (inclusive) */
	int64_t min_i, max_i;
	double min_d, max_d;
	/* STRING: max bytes; STRLIST: max bytes per string */
	size_t max_len;
	/* STRLIST/OBJLIST: max elements */
	size_t max_count;
	/* ENUM: the accepted strings; the field holds the index */
	const char *const *choices;
	size_t n_choices;
	/* OBJLIST/OBJECT: how each element / the nested object is described */
	const struct cm_cfg_section *sub;
};

struct cm_cfg_section {
	const char *name;       /* top-level member name in the file */
	const struct cm_cfg_key *keys;
	size_t n_keys;
	size_t struct_size;     /* sizeof the struct the keys point into */
	const char *doc;
};

/* Owned list of strings (STRLIST). */
struct cm_cfg_strlist {
	char **items;
	size_t n;
};

/* Owned array of n structs of the sub-section's struct_size (OBJLIST). */
struct cm_cfg_objlist {
	void *items;
	size_t n;
};

/* ---- declaration helpers ---------------------------------------------
 * Each macro builds one key named after the struct field and fails to
 * compile when the field does not have the C type the key type needs. */

#define CM_CFG_OFF_(st, field, ctype) \
	(offsetof(st, field) + 0 * sizeof(_Generic(((st *)0)->field, ctype: 1)))

#define CM_CFG_BOOL(st, field, def, doc_)                                   \
	{ .name = #field, .type = CM_CFG_T_BOOL,                             \
	  .offset = CM_CFG_OFF_(st, field, bool), .def_i = (def), .doc = (doc_) }
#define CM_CFG_INT(st, field, def, lo, hi, doc_)                            \
	{ .name = #field, .type = CM_CFG_T_INT,                              \
	  .offset = CM_CFG_OFF_(st, field, int64_t), .def_i = (def),         \
	  .min_i = (lo), .max_i = (hi), .doc = (doc_) }
#define CM_CFG_DOUBLE(st, field, def, lo, hi, doc_)                         \
	{ .name = #field, .type = CM_CFG_T_DOUBLE,                           \
	  .offset = CM_CFG_OFF_(st, field, double), .def_d = (def),          \
	  .min_d = (lo), .max_d = (hi), .doc = (doc_) }
#define CM_CFG_STRING(st, field, def, maxlen, doc_)                         \
	{ .name = #field, .type = CM_CFG_T_STRING,                           \
	  .offset = CM_CFG_OFF_(st, field, char *), .def_s = (def),          \
	  .max_len = (maxlen), .doc = (doc_) }
#define CM_CFG_ENUM(st, field, def_index, choices_, doc_)                   \
	{ .name = #field, .type = CM_CFG_T_ENUM,                             \
	  .offset = CM_CFG_OFF_(st, field, int), .def_i = (def_index),       \
	  .choices = (choices_),                                             \
	  .n_choices = sizeof(choices_) / sizeof((choices_)[0]), .doc = (doc_) }
#define CM_CFG_SIZE(st, field, def, lo, hi, doc_)                           \
	{ .name = #field, .type = CM_CFG_T_SIZE,                             \
	  .offset = CM_CFG_OFF_(st, field, uint64_t), .def_i = (def),        \
	  .min_i = (lo), .max_i = (hi), .doc = (doc_) }
#define CM_CFG_DURATION(st, field, def_ms, lo_ms, hi_ms, doc_)              \
	{ .name = #field, .type = CM_CFG_T_DURATION,                         \
	  .offset = CM_CFG_OFF_(st, field, int64_t), .def_i = (def_ms),      \
	  .min_i = (lo_ms), .max_i = (hi_ms), .doc = (doc_) }
#define CM_CFG_STRLIST(st, field, def_list_, maxcount, maxlen, doc_)        \
	{ .name = #field, .type = CM_CFG_T_STRLIST,                          \
	  .offset = CM_CFG_OFF_(st, field, struct cm_cfg_strlist),           \
	  .def_list = (def_list_), .max_count = (maxcount),                  \
	  .max_len = (maxlen), .doc = (doc_) }
#define CM_CFG_OBJLIST(st, field, sub_, maxcount, doc_)                     \
	{ .name = #field, .type = CM_CFG_T_OBJLIST,                          \
	  .offset = CM_CFG_OFF_(st, field, struct cm_cfg_objlist),           \
	  .sub = (sub_), .max_count = (maxcount), .doc = (doc_) }
/* For OBJECT the field type is checked against the sub-section's size. */
#define CM_CFG_OBJECT(st, field, sub_, doc_)                                \
	{ .name = #field, .type = CM_CFG_T_OBJECT,                           \
	  .offset = offsetof(st, field), .sub = (sub_), .doc = (doc_) }

#define CM_CFG_SECTION(name_, st, keys_, doc_)                              \
	{ .name = (name_), .keys = (keys_),                                  \
	  .n_keys = sizeof(keys_) / sizeof((keys_)[0]),                      \
	  .struct_size = sizeof(st), .doc = (doc_) }

/* ---- API ----------------------------------------------------------- */

/*
 * Zeroes the section's struct (struct_size bytes) and sets every key to its
 * default.  Allocates default strings; CM_ENOMEM leaves the struct zeroed.
 */
enum cm_status cm_cfg_defaults(const struct cm_cfg_section *sec, void *st) CM_WUR;

/*
 * Loads a configuration file of at most CM_LIM_CONFIG_FILE_BYTES: sets the
 * defaults of all `n` sections, then applies the file.  sections[i] fills
 * structs[i].  On error writes a message (prefixed with the path) into
 * err[errlen] and leaves every struct zeroed.  CM_EIO (cannot read),
 * CM_ELIMIT (file too big), CM_EFORMAT (JSON syntax), CM_EINVAL (a key's
 * value, an unknown key or section), CM_ENOMEM.
 */
enum cm_status cm_cfg_load_file(const char *path,
				const struct cm_cfg_section *const *sections,
				void *const *structs, size_t n, char *err,
				size_t errlen) CM_WUR;

/* The same from text in memory (len bytes, NUL not needed). */
enum cm_status cm_cfg_load_string(const char *text, size_t len,
				  const struct cm_cfg_section *const *sections,
				  void *const *structs, size_t n, char *err,
				  size_t errlen) CM_WUR;

/*
 * Validates a file against `n` sections without keeping the values (the
 * structs are allocated, filled and freed here): `--check-config`.
 */
enum cm_status cm_cfg_check_file(const char *path,
				 const struct cm_cfg_section *const *sections,
				 size_t n, char *err, size_t errlen) CM_WUR;

/* Releases owned strings and lists and zeroes the struct; NULL is a no-op. */
void cm_cfg_free(const struct cm_cfg_section *sec, void *st);

/*
 * Appends the section as Markdown to `out`: a heading, the section doc and
 * one table row per key (name, type, default, bounds, doc); nested objects
 * and list elements are rendered as rows with dotted / [] paths.
 */
enum cm_status cm_cfg_doc_markdown(const struct cm_cfg_section *sec,
				   struct cm_buf *out) CM_WUR;

/*
 * Parses a size ("512MiB", "2GiB", "64KB", "1024", "1024B") into bytes.
 * Units: B, KiB, MiB, GiB, TiB (powers of 1024), KB, MB, GB, TB (powers of
 * 1000), case-sensitive; no fractions, no sign, no spaces.
 */
enum cm_status cm_cfg_parse_size(const char *s, uint64_t *out) CM_WUR;
/* Parses a duration ("500ms", "10s", "2m", "1h", "250") into milliseconds. */
enum cm_status cm_cfg_parse_duration(const char *s, int64_t *out_ms) CM_WUR;

#endif
