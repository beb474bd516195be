/*
 * config.c - the declarative configuration loader (see config.h).
 *
 * Owns: nothing beyond the call; strings and lists it allocates belong to
 * the caller's structs until cm_cfg_free().
 * Invariant: at every point of a load the structs are in a state that
 * cm_cfg_free() can release (values are built completely, then swapped
 * in), so any error simply frees everything and zeroes the structs.
 * Parsing uses jansson (with JSON_REJECT_DUPLICATES); jansson's own
 * allocations are not routed through cm_malloc, ours are.
 */
#include "common/config_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/limits.h"

/* ===================================================================
 * Value parsing
 * =================================================================== */

static enum cm_status cfg_parse_uint(const char **sp, uint64_t *out)
{
	const char *s = *sp;
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return CM_EINVAL;
	while (*s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return CM_EINVAL;
		v = v * 10 + d;
		s++;
	}
	*sp = s;
	*out = v;
	return CM_OK;
}

/* A number with a unit suffix from units[n] ("" allowed when listed),
 * at most `max` after scaling. */
struct cfg_unit {
	const char *unit;
	uint64_t mul;
};

static enum cm_status cfg_parse_scaled(const char *s, const struct cfg_unit *units, size_t n,
				       uint64_t max, uint64_t *out)
{
	uint64_t v;

	if (cfg_parse_uint(&s, &v) != CM_OK)
		return CM_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(s, units[i].unit) != 0)
			continue;
		if (v > max / units[i].mul)
			return CM_EINVAL;
		*out = v * units[i].mul;
		return CM_OK;
	}
	return CM_EINVAL;
}

enum cm_status cm_cfg_parse_size(const char *s, uint64_t *out)
{
	static const struct cfg_unit units[] = {
		{ "", 1 },
		{ "B", 1 },
		{ "KiB", 1ull << 10 },
		{ "MiB", 1ull << 20 },
		{ "GiB", 1ull << 30 },
		{ "TiB", 1ull << 40 },
		{ "KB", 1000ull },
		{ "MB", 1000ull * 1000 },
		{ "GB", 1000ull * 1000 * 1000 },
		{ "TB", 1000ull * 1000 * 1000 * 1000 },
	};

	return cfg_parse_scaled(s, units, sizeof(units) / sizeof(units[0]), UINT64_MAX, out);
}

enum cm_status cm_cfg_parse_duration(const char *s, int64_t *out_ms)
{
	static const struct cfg_unit units[] = {
		{ "", 1 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 },
		{ "h", 3600000 },
	};
	uint64_t v;
	enum cm_status st = cfg_parse_scaled(s, units, sizeof(units) / sizeof(units[0]),
					     (uint64_t)INT64_MAX, &v);

	if (st == CM_OK)
		*out_ms = (int64_t)v;
	return st;
}

/* ===================================================================
 * Defaults and freeing
 * =================================================================== */

static void *cfg_field(void *st, const struct cm_cfg_key *k)
{
	return (char *)st + k->offset;
}

static void cfg_strlist_free(struct cm_cfg_strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		cm_free(l->items[i]);
	cm_free(l->items);
	l->items = NULL;
	l->n = 0;
}

static void cfg_objlist_free(const struct cm_cfg_section *sub,
			     struct cm_cfg_objlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		cm_cfg_free(sub, (char *)l->items + i * sub->struct_size);
	cm_free(l->items);
	l->items = NULL;
	l->n = 0;
}

/* Releases the owned parts of the keys of `sec` in `st`, leaving NULLs. */
static void cfg_release(const struct cm_cfg_section *sec, void *st)
{
	for (size_t i = 0; i < sec->n_keys; i++) {
		const struct cm_cfg_key *k = &sec->keys[i];
		void *f = cfg_field(st, k);

		switch (k->type) {
		case CM_CFG_T_STRING:
			cm_free(*(char **)f);
			*(char **)f = NULL;
			break;
		case CM_CFG_T_STRLIST:
			cfg_strlist_free(f);
			break;
		case CM_CFG_T_OBJLIST:
			cfg_objlist_free(k->sub, f);
			break;
		case CM_CFG_T_OBJECT:
			cfg_release(k->sub, f);
			break;
		default:
			break;
		}
	}
}

void cm_cfg_free(const struct cm_cfg_section *sec, void *st)
{
	if (!sec || !st)
		return;
	cfg_release(sec, st);
	memset(st, 0, sec->struct_size);
}

/* Sets defaults into an already zeroed struct; partial on CM_ENOMEM. */
static enum cm_status cfg_set_defaults(const struct cm_cfg_section *sec,
				       void *st)
{
	for (size_t i = 0; i < sec->n_keys; i++) {
		const struct cm_cfg_key *k = &sec->keys[i];
		void *f = cfg_field(st, k);
		enum cm_status s;

		switch (k->type) {
		case CM_CFG_T_BOOL:
			*(bool *)f = k->def_i != 0;
			break;
		case CM_CFG_T_INT:
		case CM_CFG_T_DURATION:
			*(int64_t *)f = k->def_i;
			break;
		case CM_CFG_T_SIZE:
			*(uint64_t *)f = (uint64_t)k->def_i;
			break;
		case CM_CFG_T_ENUM:
			*(int *)f = (int)k->def_i;
			break;
		case CM_CFG_T_DOUBLE:
			*(double *)f = k->def_d;
			break;
		case CM_CFG_T_STRING:
			if (k->def_s) {
				*(char **)f = cm_strdup(k->def_s);
				if (!*(char **)f)
					return CM_ENOMEM;
			}
			break;
		case CM_CFG_T_STRLIST: {
			struct cm_cfg_strlist *l = f;
			size_t n = 0;

			while (k->def_list && k->def_list[n])
				n++;
			if (n == 0)
				break;
			l->items = cm_calloc(n, sizeof(char *));
			if (!l->items)
				return CM_ENOMEM;
			for (; l->n < n; l->n++) {
				l->items[l->n] = cm_strdup(k->def_list[l->n]);
				if (!l->items[l->n])
					return CM_ENOMEM;
			}
			break;
		}
		case CM_CFG_T_OBJECT:
			s = cfg_set_defaults(k->sub, f);
			if (s != CM_OK)
				return s;
			break;
		case CM_CFG_T_OBJLIST:
			break;
		}
	}
	return CM_OK;
}

enum cm_status cm_cfg_defaults(const struct cm_cfg_section *sec, void *st)
{
	enum cm_status s;

	memset(st, 0, sec->struct_size);
	s = cfg_set_defaults(sec, st);
	if (s != CM_OK)
		cm_cfg_free(sec, st);
	return s;
}

/* ===================================================================
 * Applying JSON to a struct
 * =================================================================== */

static enum cm_status cfg_apply_object(struct cfg_ctx *c,
				       const struct cm_cfg_section *sec,
				       const json_t *obj, void *st,
				       bool is_section);

static enum cm_status cfg_apply_int_like(struct cfg_ctx *c,
					 const struct cm_cfg_key *k,
					 const json_t *v, void *f)
{
	char exp[160], found[96];
	int64_t iv;

	if (json_is_integer(v)) {
		iv = json_integer_value(v);
	} else if (json_is_string(v) && k->type != CM_CFG_T_INT) {
		const char *s = json_string_value(v);
		uint64_t u;

		if (strlen(s) != json_string_length(v))
			goto bad_format;
		if (k->type == CM_CFG_T_SIZE) {
			if (cm_cfg_parse_size(s, &u) != CM_OK || u > INT64_MAX)
				goto bad_format;
			iv = (int64_t)u;
		} else if (cm_cfg_parse_duration(s, &iv) != CM_OK) {
			goto bad_format;
		}
	} else {
		goto bad_format;
	}
	if (iv < k->min_i || iv > k->max_i) {
		cm_cfg_err_value(c, k, v);
		return CM_EINVAL;
	}
	if (k->type == CM_CFG_T_SIZE)
		*(uint64_t *)f = (uint64_t)iv;
	else
		*(int64_t *)f = iv;
	return CM_OK;

bad_format:
	cm_cfg_expected(k, exp, sizeof(exp));
	cm_cfg_describe(v, k->flags, found, sizeof(found));
	if (k->type == CM_CFG_T_SIZE)
		cm_cfg_err(c, "%s: expected %s (an integer number of bytes or a "
			"string like \"512MiB\"), found %s", c->path, exp, found);
	else if (k->type == CM_CFG_T_DURATION)
		cm_cfg_err(c, "%s: expected %s (integer milliseconds or a string "
			"like \"500ms\", \"10s\", \"2m\"), found %s",
			c->path, exp, found);
	else
		cm_cfg_err_value(c, k, v);
	return CM_EINVAL;
}

static enum cm_status cfg_check_string(struct cfg_ctx *c, const json_t *v,
				       size_t max_len, unsigned flags)
{
	char found[96];

	if (!json_is_string(v)) {
		cm_cfg_describe(v, flags, found, sizeof(found));
		cm_cfg_err(c, "%s: expected a string of at most %zu bytes, found %s",
			c->path, max_len, found);
		return CM_EINVAL;
	}
	if (json_string_length(v) > max_len) {
		cm_cfg_err(c, "%s: expected a string of at most %zu bytes, found "
			"a string of %zu bytes", c->path, max_len,
			json_string_length(v));
		return CM_EINVAL;
	}
	/* jansson rejects \u0000 by default; a NUL could not be carried in a
	 * C string anyway. */
	return CM_OK;
}

/* A list value: an array of at most k->max_count elements (`what` names
 * them in the message); *n its size. */
static enum cm_status cfg_array_check(struct cfg_ctx *c, const struct cm_cfg_key *k,
				      const json_t *v, const char *what, size_t *n)
{
	if (!json_is_array(v)) {
		cm_cfg_err_value(c, k, v);
		return CM_EINVAL;
	}
	*n = json_array_size(v);
	if (*n > k->max_count) {
		cm_cfg_err(c, "%s: expected an array of at most %zu %s, found %zu", c->path,
			   k->max_count, what, *n);
		return CM_EINVAL;
	}
	return CM_OK;
}

static enum cm_status cfg_apply_strlist(struct cfg_ctx *c,
					const struct cm_cfg_key *k,
					const json_t *v, void *f)
{
	struct cm_cfg_strlist nl = { 0 };
	enum cm_status s = CM_OK;
	size_t n;

	if (cfg_array_check(c, k, v, "strings", &n) != CM_OK)
		return CM_EINVAL;
	for (size_t i = 0; i < n; i++) {
		size_t old = cm_cfg_path_push(c, "[%zu]", i);

		s = cfg_check_string(c, json_array_get(v, i), k->max_len,
				     k->flags);
		cm_cfg_path_pop(c, old);
		if (s != CM_OK)
			return s;
	}
	if (n) {
		nl.items = cm_calloc(n, sizeof(char *));
		if (!nl.items)
			return CM_ENOMEM;
	}
	for (; nl.n < n; nl.n++) {
		const json_t *e = json_array_get(v, nl.n);

		nl.items[nl.n] = cm_strndup(json_string_value(e),
					    json_string_length(e));
		if (!nl.items[nl.n]) {
			s = CM_ENOMEM;
			goto out;
		}
	}
	cfg_strlist_free(f);
	*(struct cm_cfg_strlist *)f = nl;
	nl.items = NULL;
	nl.n = 0;
out:
	cfg_strlist_free(&nl);
	return s;
}

static enum cm_status cfg_apply_objlist(struct cfg_ctx *c,
					const struct cm_cfg_key *k,
					const json_t *v, void *f)
{
	const struct cm_cfg_section *sub = k->sub;
	struct cm_cfg_objlist nl = { 0 };
	enum cm_status s = CM_OK;
	size_t n;

	if (cfg_array_check(c, k, v, "objects", &n) != CM_OK)
		return CM_EINVAL;
	if (n) {
		nl.items = cm_calloc(n, sub->struct_size);
		if (!nl.items)
			return CM_ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		void *item = (char *)nl.items + i * sub->struct_size;
		size_t old = cm_cfg_path_push(c, "[%zu]", i);

		/* item i is zeroed (calloc): freeing it when partly filled is
		 * safe, so count it before filling */
		nl.n = i + 1;
		s = cfg_set_defaults(sub, item);
		if (s == CM_OK)
			s = cfg_apply_object(c, sub, json_array_get(v, i), item,
					     false);
		cm_cfg_path_pop(c, old);
		if (s != CM_OK)
			goto out;
	}
	cfg_objlist_free(sub, f);
	*(struct cm_cfg_objlist *)f = nl;
	nl.items = NULL;
	nl.n = 0;
out:
	cfg_objlist_free(sub, &nl);
	return s;
}

static enum cm_status cfg_apply_key(struct cfg_ctx *c,
				    const struct cm_cfg_key *k,
				    const json_t *v, void *st)
{
	void *f = cfg_field(st, k);

	switch (k->type) {
	case CM_CFG_T_BOOL:
		if (!json_is_boolean(v))
			break;
		*(bool *)f = json_is_true(v);
		return CM_OK;
	case CM_CFG_T_INT:
	case CM_CFG_T_SIZE:
	case CM_CFG_T_DURATION:
		return cfg_apply_int_like(c, k, v, f);
	case CM_CFG_T_DOUBLE: {
		double d;

		if (!json_is_number(v))
			break;
		d = json_number_value(v);
		if (!(d >= k->min_d && d <= k->max_d))
			break;
		*(double *)f = d;
		return CM_OK;
	}
	case CM_CFG_T_STRING: {
		enum cm_status s = cfg_check_string(c, v, k->max_len, k->flags);
		char *dup;

		if (s != CM_OK)
			return s;
		dup = cm_strndup(json_string_value(v), json_string_length(v));
		if (!dup)
			return CM_ENOMEM;
		cm_free(*(char **)f);
		*(char **)f = dup;
		return CM_OK;
	}
	case CM_CFG_T_ENUM:
		if (!json_is_string(v))
			break;
		for (size_t i = 0; i < k->n_choices; i++) {
			if (strcmp(json_string_value(v), k->choices[i]) == 0 &&
			    strlen(k->choices[i]) == json_string_length(v)) {
				*(int *)f = (int)i;
				return CM_OK;
			}
		}
		break;
	case CM_CFG_T_STRLIST:
		return cfg_apply_strlist(c, k, v, f);
	case CM_CFG_T_OBJLIST:
		return cfg_apply_objlist(c, k, v, f);
	case CM_CFG_T_OBJECT:
		if (!json_is_object(v))
			break;
		return cfg_apply_object(c, k->sub, v, f, false);
	}
	cm_cfg_err_value(c, k, v);
	return CM_EINVAL;
}

static const struct cm_cfg_key *cfg_find_key(const struct cm_cfg_section *sec,
					     const char *name)
{
	for (size_t i = 0; i < sec->n_keys; i++)
		if (strcmp(sec->keys[i].name, name) == 0)
			return &sec->keys[i];
	return NULL;
}

/*
 * Applies the members of `obj` (already known to be an object) to `st`.
 * c->path holds the path of the object itself.
 */
static enum cm_status cfg_apply_object(struct cfg_ctx *c,
				       const struct cm_cfg_section *sec,
				       const json_t *obj, void *st,
				       bool is_section)
{
	const char *name;
	json_t *v;

	if (!json_is_object(obj)) {
		char found[96];

		cm_cfg_describe(obj, 0, found, sizeof(found));
		cm_cfg_err(c, "%s: expected an object, found %s", c->path, found);
		return CM_EINVAL;
	}
	json_object_foreach((json_t *)obj, name, v) {
		const struct cm_cfg_key *k = cfg_find_key(sec, name);
		enum cm_status s;
		size_t old;

		if (!k) {
			char q[CFG_SHOW_BYTES * 4 + 8], sug[CFG_SUGGEST_MAX + 24];
			const char *best = NULL;
			size_t best_d = SIZE_MAX;

			for (size_t i = 0; i < sec->n_keys; i++)
				cm_cfg_consider(name, sec->keys[i].name, &best,
					     &best_d);
			cm_cfg_fmt_suggestion(best, sug, sizeof(sug));
			cm_cfg_quote(name, strlen(name), q, sizeof(q));
			cm_cfg_err(c, "unknown key %s in %s\"%s\"%s", q,
				is_section ? "section " : "", c->path, sug);
			return CM_EINVAL;
		}
		old = cm_cfg_path_push(c, ".%s", k->name);
		s = cfg_apply_key(c, k, v, st);
		cm_cfg_path_pop(c, old);
		if (s != CM_OK)
			return s;
	}
	for (size_t i = 0; i < sec->n_keys; i++) {
		const struct cm_cfg_key *k = &sec->keys[i];

		if ((k->flags & CM_CFG_F_REQUIRED) &&
		    !json_object_get(obj, k->name)) {
			cm_cfg_err(c, "%s.%s: required key is missing", c->path,
				k->name);
			return CM_EINVAL;
		}
	}
	return CM_OK;
}

/* ===================================================================
 * Loading
 * =================================================================== */

static enum cm_status cfg_load_json(struct cfg_ctx *c, const json_t *root,
				    const struct cm_cfg_section *const *sections,
				    void *const *structs, size_t n)
{
	const char *name;
	json_t *v;

	if (!json_is_object(root)) {
		char found[96];

		cm_cfg_describe(root, 0, found, sizeof(found));
		cm_cfg_err(c, "expected a JSON object whose members are sections, "
			"found %s", found);
		return CM_EINVAL;
	}
	json_object_foreach((json_t *)root, name, v) {
		enum cm_status s;
		size_t i;

		for (i = 0; i < n; i++)
			if (strcmp(sections[i]->name, name) == 0)
				break;
		if (i == n) {
			char q[CFG_SHOW_BYTES * 4 + 8], sug[CFG_SUGGEST_MAX + 24];
			const char *best = NULL;
			size_t best_d = SIZE_MAX;

			for (size_t j = 0; j < n; j++)
				cm_cfg_consider(name, sections[j]->name, &best,
					     &best_d);
			cm_cfg_fmt_suggestion(best, sug, sizeof(sug));
			cm_cfg_quote(name, strlen(name), q, sizeof(q));
			cm_cfg_err(c, "unknown section %s%s", q, sug);
			return CM_EINVAL;
		}
		cm_cfg_path_pop(c, 0);
		cm_cfg_path_push(c, "%s", sections[i]->name);
		s = cfg_apply_object(c, sections[i], v, structs[i], true);
		cm_cfg_path_pop(c, 0);
		if (s != CM_OK)
			return s;
	}
	return CM_OK;
}

static enum cm_status cfg_load(struct cfg_ctx *c, const char *text, size_t len,
			       const struct cm_cfg_section *const *sections,
			       void *const *structs, size_t n)
{
	enum cm_status s = CM_OK;
	json_error_t jerr;
	json_t *root = NULL;
	size_t i;

	if (c->err && c->errlen)
		c->err[0] = '\0';
	for (i = 0; i < n; i++)
		memset(structs[i], 0, sections[i]->struct_size);
	for (i = 0; i < n; i++) {
		s = cm_cfg_defaults(sections[i], structs[i]);
		if (s != CM_OK) {
			cm_cfg_err(c, "out of memory setting defaults");
			goto out;
		}
	}
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		if (c->origin && c->err)
			snprintf(c->err, c->errlen, "%s:%d:%d: JSON syntax "
				 "error: %s", c->origin, jerr.line, jerr.column,
				 jerr.text);
		else
			cm_cfg_err(c, "JSON syntax error at line %d, column %d: "
				"%s", jerr.line, jerr.column, jerr.text);
		s = CM_EFORMAT;
		goto out;
	}
	s = cfg_load_json(c, root, sections, structs, n);
	if (s == CM_ENOMEM)
		cm_cfg_err(c, "out of memory while loading the configuration");
out:
	json_decref(root);
	if (s != CM_OK)
		for (i = 0; i < n; i++)
			cm_cfg_free(sections[i], structs[i]);
	return s;
}

enum cm_status cm_cfg_load_string(const char *text, size_t len,
				  const struct cm_cfg_section *const *sections,
				  void *const *structs, size_t n, char *err,
				  size_t errlen)
{
	struct cfg_ctx c = { .err = err, .errlen = errlen };

	if (len > CM_LIM_CONFIG_FILE_BYTES) {
		for (size_t i = 0; i < n; i++)
			memset(structs[i], 0, sections[i]->struct_size);
		cm_cfg_err(&c, "configuration is %zu bytes, over the %d-byte limit",
			len, CM_LIM_CONFIG_FILE_BYTES);
		return CM_ELIMIT;
	}
	return cfg_load(&c, text, len, sections, structs, n);
}

enum cm_status cm_cfg_load_file(const char *path,
				const struct cm_cfg_section *const *sections,
				void *const *structs, size_t n, char *err,
				size_t errlen)
{
	struct cfg_ctx c = { .err = err, .errlen = errlen, .origin = path };
	struct cm_buf b;
	enum cm_status s = CM_OK;
	int fd = -1;

	cm_buf_init(&b, CM_LIM_CONFIG_FILE_BYTES + 1);
	for (size_t i = 0; i < n; i++)
		memset(structs[i], 0, sections[i]->struct_size);
	/* O_NONBLOCK: a FIFO is refused, not waited on */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		cm_cfg_err(&c, "cannot open: %s", strerror(errno));
		s = errno == ENOENT ? CM_ENOTFOUND : CM_EIO;
		goto out;
	}
	{
		struct stat sb;

		if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			cm_cfg_err(&c, "expected a regular file");
			s = CM_EFORMAT;
			goto out;
		}
	}
	for (;;) {
		size_t want = cm_buf_room(&b) < 65536 ? cm_buf_room(&b) : 65536;
		ssize_t r;

		if (want == 0) {
			cm_cfg_err(&c, "file is larger than the %d-byte limit",
				CM_LIM_CONFIG_FILE_BYTES);
			s = CM_ELIMIT;
			goto out;
		}
		s = cm_buf_reserve(&b, want);
		if (s != CM_OK) {
			cm_cfg_err(&c, "out of memory reading the file");
			goto out;
		}
		r = read(fd, cm_buf_tail(&b), want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			cm_cfg_err(&c, "cannot read: %s", strerror(errno));
			s = CM_EIO;
			goto out;
		}
		if (r == 0)
			break;
		cm_buf_commit(&b, (size_t)r);
	}
	s = cfg_load(&c, (const char *)cm_buf_data(&b), cm_buf_len(&b),
		     sections, structs, n);
out:
	if (fd >= 0)
		close(fd);
	cm_buf_deinit(&b);
	return s;
}

enum cm_status cm_cfg_check_file(const char *path,
				 const struct cm_cfg_section *const *sections,
				 size_t n, char *err, size_t errlen)
{
	void **structs = NULL;
	enum cm_status s = CM_OK;
	size_t i;

	if (err && errlen)
		err[0] = '\0';
	structs = cm_calloc(n ? n : 1, sizeof(void *));
	if (!structs) {
		s = CM_ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		structs[i] = cm_calloc(1, sections[i]->struct_size);
		if (!structs[i]) {
			s = CM_ENOMEM;
			goto out;
		}
	}
	s = cm_cfg_load_file(path, sections, structs, n, err, errlen);
	if (s == CM_OK)
		for (i = 0; i < n; i++)
			cm_cfg_free(sections[i], structs[i]);
out:
	if (s == CM_ENOMEM && err && errlen && !err[0])
		snprintf(err, errlen, "%s: out of memory", path);
	for (i = 0; structs && i < n; i++)
		cm_free(structs[i]);
	cm_free(structs);
	return s;
}
