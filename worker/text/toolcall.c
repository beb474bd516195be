/*
 * toolcall.c - the streaming parser of content, reasoning and tool calls
 * in a chat model's output, per family (see toolcall.h): a small state
 * machine over the bytes held back, one table of markers per family.
 */
#include "worker/text/toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/alloc.h"
#include "common/buf.h"

/* JSON nesting a call may have (the scanner counts it; jansson recurses). */
#define TC_JSON_DEPTH_MAX 64
/* A feed is taken in pieces of at most this; the buffer holds a call's
 * bound and one piece. */
#define TC_FEED_PIECE (64u * 1024)
/* Whitespace held where a call or thinking may still begin; beyond, it is text. */
#define TC_WS_HOLD_MAX 4096

enum tc_state {
	TC_START = 0,   /* where the message (or what follows thinking) begins */
	TC_TEXT,        /* content; watching for the family's call marker */
	TC_THINK,       /* reasoning, up to </think> */
	TC_TAG,         /* HERMES: inside <tool_call>, up to </tool_call> */
	TC_JSON,        /* a JSON value that may be calls, scanned to its end */
	TC_AFTER,       /* after calls: whitespace, separators, the next call */
};

struct wk_tc {
	struct wk_tc_config cfg;
	enum tc_state st;
	int thought;        /* thinking was seen (or is open) */
	int after_think;    /* TC_START follows </think>: its whitespace goes */
	struct cm_buf pend; /* bytes not yet emitted */
	/* TC_TAG and TC_JSON: the raw call text is pend[0..); the value
	 * starts after `skip` bytes (marker, whitespace) */
	size_t skip;
	/* TC_JSON scanner over pend[skip..scan); TC_TAG: tag_end's (begun
	 * 0 before the value, 1 in it, 2 after it or no JSON) */
	size_t scan;
	int depth, in_str, esc, begun;
	unsigned calls;
};

static const char M_THINK[] = "<think>";
static const char M_THINK_END[] = "</think>";
static const char M_HERMES[] = "<tool_call>";
static const char M_HERMES_END[] = "</tool_call>";
static const char M_MISTRAL[] = "[TOOL_CALLS]";
static const char M_PYTHON_TAG[] = "<|python_tag|>";

/* The marker that opens a call in running text, NULL when the family has
 * none (JSON and NONE: calls only where the message begins). */
static const char *call_marker(enum wk_tc_family f)
{
	switch (f) {
	case WK_TC_HERMES: return M_HERMES;
	case WK_TC_MISTRAL: return M_MISTRAL;
	case WK_TC_LLAMA3: return M_PYTHON_TAG;
	default: return NULL;
	}
}

const char *wk_tc_family_name(enum wk_tc_family f)
{
	switch (f) {
	case WK_TC_HERMES: return "hermes";
	case WK_TC_LLAMA3: return "llama3";
	case WK_TC_MISTRAL: return "mistral";
	case WK_TC_JSON: return "json";
	default: return "none";
	}
}

enum cm_status wk_tc_new(const struct wk_tc_config *cfg, struct wk_tc **out)
{
	struct wk_tc *p = cm_calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return CM_ENOMEM;
	p->cfg = *cfg;
	cm_buf_init(&p->pend, WK_TC_CALL_MAX_BYTES + TC_FEED_PIECE + TC_WS_HOLD_MAX);
	if (cfg->think && cfg->think_open) {
		p->st = TC_THINK;
		p->thought = 1;
	}
	*out = p;
	return CM_OK;
}

void wk_tc_free(struct wk_tc *p)
{
	if (!p)
		return;
	cm_buf_deinit(&p->pend);
	cm_free(p);
}

unsigned wk_tc_calls(const struct wk_tc *p)
{
	return p->calls;
}

int wk_tc_thinking(const struct wk_tc *p)
{
	return p->st == TC_THINK;
}

/* ---- emitting ---------------------------------------------------------- */

static enum cm_status emit_text(wk_tc_emit_fn emit, void *ctx, enum wk_tc_kind k,
				const char *s, size_t n)
{
	struct wk_tc_event e;

	if (n == 0)
		return CM_OK;
	memset(&e, 0, sizeof(e));
	e.kind = k;
	e.text = s;
	e.len = n;
	return emit(ctx, &e);
}

/* Emits pend[0..n) as `k` and drops it. */
static enum cm_status flush(struct wk_tc *p, size_t n, enum wk_tc_kind k, wk_tc_emit_fn emit,
			    void *ctx)
{
	enum cm_status st = emit_text(emit, ctx, k, (const char *)cm_buf_data(&p->pend), n);

	cm_buf_consume(&p->pend, n);
	return st;
}

/* ---- calls --------------------------------------------------------------- */

static int ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A call object's arguments as an object (a string holding one is read);
 * missing: an empty object.  NULL when they are something else. */
static json_t *call_args(json_t *o)
{
	json_t *a = json_object_get(o, "arguments");

	if (!a)
		a = json_object_get(o, "parameters");
	if (!a)
		return json_object();
	if (json_is_object(a))
		return json_incref(a);
	if (json_is_string(a)) {
		json_t *v = json_loadb(json_string_value(a), json_string_length(a),
				       JSON_REJECT_DUPLICATES, NULL);

		if (json_is_object(v))
			return v;
		json_decref(v);
	}
	return NULL;
}

static int is_call(json_t *o)
{
	json_t *name = json_object_get(o, "name"), *id = json_object_get(o, "id"), *a;

	if (!json_is_object(o) || !json_is_string(name) || json_string_length(name) == 0 ||
	    (id && !json_is_string(id)))
		return 0;
	a = call_args(o);
	json_decref(a);
	return a != NULL;
}

/* The list of calls the value is for the family, or NULL (then it is content). */
static json_t *calls_of(enum wk_tc_family f, json_t *v)
{
	json_t *list;
	size_t i;
	json_t *c;

	if (f == WK_TC_JSON) {
		if (!json_is_object(v) || json_object_size(v) != 1)
			return NULL;
		list = json_object_get(v, "tool_calls");
		if (!json_is_array(list))
			return NULL;
		json_incref(list);
	} else if (json_is_array(v)) {
		list = json_incref(v);
	} else {
		list = json_array();
		if (!list)
			return NULL;
		json_array_append(list, v);
	}
	if (json_array_size(list) == 0)
		goto no;
	json_array_foreach(list, i, c)
		if (!is_call(c))
			goto no;
	return list;
no:
	json_decref(list);
	return NULL;
}

static enum cm_status emit_call(struct wk_tc *p, json_t *c, wk_tc_emit_fn emit, void *ctx)
{
	struct wk_tc_event e;
	json_t *a = call_args(c), *id = json_object_get(c, "id");
	char *args = a ? json_dumps(a, JSON_COMPACT) : NULL;
	enum cm_status st;

	json_decref(a);
	if (!args)
		return CM_ENOMEM;
	memset(&e, 0, sizeof(e));
	e.kind = WK_TC_CALL;
	e.name = json_string_value(json_object_get(c, "name"));
	e.args = args;
	e.id = json_is_string(id) ? json_string_value(id) : NULL;
	p->calls++;
	st = emit(ctx, &e);
	free(args);
	return st;
}

/*
 * The value in pend[from..to) as calls: emitted and pend[0..end) dropped
 * (1), or nothing emitted (0: the caller makes it content).
 */
static int take_calls(struct wk_tc *p, size_t from, size_t to, size_t end, wk_tc_emit_fn emit,
		      void *ctx, enum cm_status *st)
{
	json_t *v = json_loadb((const char *)cm_buf_data(&p->pend) + from, to - from,
			       JSON_REJECT_DUPLICATES, NULL);
	json_t *list = v ? calls_of(p->cfg.family, v) : NULL;
	size_t i;
	json_t *c;

	json_decref(v);
	if (!list)
		return 0;
	*st = CM_OK;
	json_array_foreach(list, i, c) {
		*st = emit_call(p, c, emit, ctx);
		if (*st != CM_OK)
			break;
	}
	json_decref(list);
	cm_buf_consume(&p->pend, end);
	return 1;
}

/* ---- markers ----------------------------------------------------------- */

/* Where in s[0..n) the marker m starts, or where a prefix of it ends the
 * text (*whole 0); n when neither. */
static size_t find_marker(const char *s, size_t n, const char *m, int *whole)
{
	size_t ml = strlen(m);

	*whole = 0;
	for (size_t i = 0; i < n; i++) {
		size_t k = n - i < ml ? n - i : ml;

		if (s[i] != m[0] || memcmp(s + i, m, k) != 0)
			continue;
		*whole = k == ml;
		return i;
	}
	return n;
}

/* 1 when s[0..n) is a proper prefix of m (more bytes may complete it). */
static int partial(const char *s, size_t n, const char *m)
{
	size_t ml = strlen(m);

	return n < ml && memcmp(s, m, n) == 0;
}

static int starts(const char *s, size_t n, const char *m)
{
	size_t ml = strlen(m);

	return n >= ml && memcmp(s, m, ml) == 0;
}

/* ---- states (each returns 1 when it made progress, 0 when it waits) ------ */

static void enter_json(struct wk_tc *p, size_t skip)
{
	p->st = TC_JSON;
	p->skip = skip;
	p->scan = skip;
	p->depth = p->in_str = p->esc = p->begun = 0;
}

/* The family's call marker m begins pend: the call's text follows it. */
static void enter_call(struct wk_tc *p, const char *m)
{
	if (p->cfg.family == WK_TC_HERMES) {
		p->st = TC_TAG;
		p->skip = strlen(M_HERMES);
		p->scan = p->skip;
		p->depth = p->in_str = p->esc = p->begun = 0;
	} else {
		enter_json(p, strlen(m));
	}
}

static int st_start(struct wk_tc *p, int final, wk_tc_emit_fn emit, void *ctx, enum cm_status *st)
{
	const char *s = (const char *)cm_buf_data(&p->pend);
	size_t n = cm_buf_len(&p->pend), i = 0;

	(void)emit;
	(void)ctx;
	while (i < n && ws(s[i]))
		i++;
	if (p->after_think) {
		/* the space between thinking and what follows goes */
		cm_buf_consume(&p->pend, i);
		s = (const char *)cm_buf_data(&p->pend);
		n -= i;
		i = 0;
		if (n == 0 && !final)
			return 0;
	}
	/* a call or thinking may begin after at most TC_WS_HOLD_MAX bytes
	 * of whitespace (decided by the text, however it is split) */
	if (i > TC_WS_HOLD_MAX) {
		p->st = TC_TEXT;
		return 1;
	}
	if (i == n && !final)
		return 0;
	*st = CM_OK;
	if (i < n && p->cfg.think && !p->thought) {
		if (!final && partial(s + i, n - i, M_THINK))
			return 0;
		if (starts(s + i, n - i, M_THINK)) {
			cm_buf_consume(&p->pend, i + strlen(M_THINK));
			p->st = TC_THINK;
			p->thought = 1;
			return 1;
		}
	}
	if (p->cfg.family == WK_TC_MISTRAL && i < n && s[i] == '[') {
		/* the marker itself begins with '[': it wins (the text finds it) */
		if (!final && partial(s + i, n - i, M_MISTRAL))
			return 0;
		if (!starts(s + i, n - i, M_MISTRAL)) {
			p->after_think = 0;
			enter_json(p, i);
			return 1;
		}
	}
	if (i < n && (p->cfg.family == WK_TC_LLAMA3 || p->cfg.family == WK_TC_JSON) && s[i] == '{') {
		p->after_think = 0;
		enter_json(p, i);
		return 1;
	}
	if (p->cfg.family == WK_TC_LLAMA3 && i < n) {
		if (!final && partial(s + i, n - i, M_PYTHON_TAG))
			return 0;
		if (starts(s + i, n - i, M_PYTHON_TAG)) {
			p->after_think = 0;
			enter_json(p, i + strlen(M_PYTHON_TAG));
			return 1;
		}
	}
	p->after_think = 0;
	p->st = TC_TEXT;
	return 1;
}

static int st_text(struct wk_tc *p, int final, wk_tc_emit_fn emit, void *ctx, enum cm_status *st)
{
	const char *s = (const char *)cm_buf_data(&p->pend);
	size_t n = cm_buf_len(&p->pend), at;
	const char *m = call_marker(p->cfg.family);
	int whole;

	if (n == 0)
		return 0;
	if (!m) {
		*st = flush(p, n, WK_TC_CONTENT, emit, ctx);
		return 0;
	}
	at = find_marker(s, n, m, &whole);
	if (at == n || (!whole && final)) {
		*st = flush(p, n, WK_TC_CONTENT, emit, ctx);
		return 0;
	}
	*st = flush(p, at, WK_TC_CONTENT, emit, ctx);
	if (*st != CM_OK || !whole)
		return 0; /* a partial marker waits for its next bytes */
	enter_call(p, m);
	return 1;
}

static int st_think(struct wk_tc *p, int final, wk_tc_emit_fn emit, void *ctx, enum cm_status *st)
{
	const char *s = (const char *)cm_buf_data(&p->pend);
	size_t n = cm_buf_len(&p->pend), at;
	int whole;

	if (n == 0)
		return 0;
	at = find_marker(s, n, M_THINK_END, &whole);
	if (at == n || (!whole && final)) {
		*st = flush(p, n, WK_TC_REASONING, emit, ctx);
		return 0;
	}
	*st = flush(p, at, WK_TC_REASONING, emit, ctx);
	if (*st != CM_OK || !whole)
		return 0;
	cm_buf_consume(&p->pend, strlen(M_THINK_END));
	p->st = TC_START;
	p->after_think = 1;
	return 1;
}

/* n, or less so that s[0..n) ends on a character boundary (s[n] is no
 * continuation byte); s holds more than n bytes. */
static size_t utf8_floor(const char *s, size_t n)
{
	size_t k = n;

	while (k > 0 && n - k < 3 && ((unsigned char)s[k] & 0xC0) == 0x80)
		k--;
	return ((unsigned char)s[k] & 0xC0) == 0x80 ? n : k;
}

/* A call that is not one: its raw text is content, and the text goes on. */
static int not_a_call(struct wk_tc *p, size_t n, wk_tc_emit_fn emit, void *ctx, enum cm_status *st)
{
	*st = flush(p, n, WK_TC_CONTENT, emit, ctx);
	p->st = TC_TEXT;
	return *st == CM_OK;
}

/* The string part of both JSON scanners: 1 when c is inside a string or
 * opens one (the state follows it), 0 when the caller looks at c. */
static int json_str_step(struct wk_tc *p, char c)
{
	if (p->in_str) {
		if (p->esc)
			p->esc = 0;
		else if (c == '\\')
			p->esc = 1;
		else if (c == '"')
			p->in_str = 0;
		return 1;
	}
	if (c == '"') {
		p->in_str = 1;
		return 1;
	}
	return 0;
}

/*
 * Where, from p->scan on, the closing tag starts in pend (*whole 1), or a
 * prefix of it ends pend (*whole 0); n when neither.  The tag does not
 * count inside a string of the call's JSON value (an argument may hold
 * "</tool_call>"): while the value is open (begun 1) the scanner follows
 * its strings and brackets; before it (whitespace), after it closed, or
 * when the text is no JSON object or array (begun 2), any tag counts.
 */
static size_t tag_end(struct wk_tc *p, int *whole)
{
	const char *s = (const char *)cm_buf_data(&p->pend);
	size_t n = cm_buf_len(&p->pend), el = strlen(M_HERMES_END);

	*whole = 0;
	for (; p->scan < n; p->scan++) {
		char c = s[p->scan];

		if (!p->in_str && c == M_HERMES_END[0]) {
			size_t k = n - p->scan < el ? n - p->scan : el;

			if (memcmp(s + p->scan, M_HERMES_END, k) == 0) {
				*whole = k == el;
				return p->scan;
			}
		}
		if (p->begun == 0) {
			if (ws(c))
				continue;
			p->begun = c == '{' || c == '[' ? 1 : 2;
		}
		if (p->begun != 1 || json_str_step(p, c))
			continue;
		if (c == '{' || c == '[') {
			p->depth++;
		} else if ((c == '}' || c == ']') && --p->depth == 0) {
			p->begun = 2; /* closed: what follows is no string */
		}
	}
	return n;
}

static int st_tag(struct wk_tc *p, int final, wk_tc_emit_fn emit, void *ctx, enum cm_status *st)
{
	const char *s = (const char *)cm_buf_data(&p->pend);
	size_t n = cm_buf_len(&p->pend), at, el = strlen(M_HERMES_END);
	int whole;

	at = tag_end(p, &whole);
	if (whole && at + el > WK_TC_CALL_MAX_BYTES)
		return not_a_call(p, at + el, emit, ctx, st); /* too long to be one */
	if (whole) {
		if (take_calls(p, p->skip, at, at + el, emit, ctx, st)) {
			p->st = TC_AFTER;
			return *st == CM_OK;
		}
		return not_a_call(p, at + el, emit, ctx, st);
	}
	if (final) {
		/* the closing tag never came: a complete call is still one */
		if (take_calls(p, p->skip, n, n, emit, ctx, st))
			return 0;
		return not_a_call(p, n, emit, ctx, st);
	}
	if (n > WK_TC_CALL_MAX_BYTES) /* too long to be one */
		return not_a_call(p, utf8_floor(s, WK_TC_CALL_MAX_BYTES), emit, ctx, st);
	return 0;
}

/* Scans pend for the end of the JSON value; 1 when found (*end after it),
 * -1 when the text is not a JSON object or array (or too deep, or too
 * long) from p->scan on, 0 when it needs more. */
static int json_scan(struct wk_tc *p, size_t *end)
{
	const char *s = (const char *)cm_buf_data(&p->pend);
	size_t n = cm_buf_len(&p->pend);

	for (; p->scan < n; p->scan++) {
		char c = s[p->scan];

		if (p->scan >= WK_TC_CALL_MAX_BYTES)
			return -1; /* too long to be a call */
		if (!p->begun) {
			if (ws(c))
				continue;
			if (c != '{' && c != '[')
				return -1;
			p->begun = 1;
			p->skip = p->scan;
		}
		if (json_str_step(p, c))
			continue;
		if (c == '{' || c == '[') {
			if (++p->depth > TC_JSON_DEPTH_MAX)
				return -1;
		} else if (c == '}' || c == ']') {
			if (--p->depth == 0) {
				*end = ++p->scan;
				return 1;
			}
		}
	}
	return 0;
}

static int st_json(struct wk_tc *p, int final, wk_tc_emit_fn emit, void *ctx, enum cm_status *st)
{
	size_t n = cm_buf_len(&p->pend), end = 0;
	int r = json_scan(p, &end);

	if (r > 0) {
		if (take_calls(p, p->skip, end, end, emit, ctx, st)) {
			p->st = TC_AFTER;
			return *st == CM_OK;
		}
		return not_a_call(p, end, emit, ctx, st);
	}
	if (r < 0) {
		/* content up to where it stopped being a call (decided by the
		 * text): what follows is looked at as text */
		size_t upto = p->scan >= WK_TC_CALL_MAX_BYTES ? utf8_floor((const char *)cm_buf_data(&p->pend),
									      WK_TC_CALL_MAX_BYTES)
							       : p->scan;

		return not_a_call(p, upto, emit, ctx, st);
	}
	if (final)
		return not_a_call(p, n, emit, ctx, st);
	return 0;
}

static int st_after(struct wk_tc *p, int final, wk_tc_emit_fn emit, void *ctx, enum cm_status *st)
{
	const char *s = (const char *)cm_buf_data(&p->pend);
	size_t n = cm_buf_len(&p->pend), i = 0;
	const char *m = call_marker(p->cfg.family);

	(void)emit;
	(void)ctx;
	while (i < n && (ws(s[i]) || (p->cfg.family == WK_TC_LLAMA3 && s[i] == ';')))
		i++;
	if (i == n) {
		cm_buf_consume(&p->pend, n); /* the space after a call goes */
		return 0;
	}
	if (m && !final && partial(s + i, n - i, m))
		return 0;
	*st = CM_OK;
	if (m && starts(s + i, n - i, m)) {
		cm_buf_consume(&p->pend, i);
		enter_call(p, m);
		return 1;
	}
	if (p->cfg.family == WK_TC_LLAMA3 && s[i] == '{') {
		cm_buf_consume(&p->pend, i);
		enter_json(p, 0);
		return 1;
	}
	/* text after the calls is content (the space that separated it
	 * from them goes) */
	cm_buf_consume(&p->pend, i);
	p->st = TC_TEXT;
	return 1;
}

static enum cm_status run(struct wk_tc *p, int final, wk_tc_emit_fn emit, void *ctx)
{
	enum cm_status st = CM_OK;
	int more;

	do {
		switch (p->st) {
		case TC_START: more = st_start(p, final, emit, ctx, &st); break;
		case TC_TEXT: more = st_text(p, final, emit, ctx, &st); break;
		case TC_THINK: more = st_think(p, final, emit, ctx, &st); break;
		case TC_TAG: more = st_tag(p, final, emit, ctx, &st); break;
		case TC_JSON: more = st_json(p, final, emit, ctx, &st); break;
		default: more = st_after(p, final, emit, ctx, &st); break;
		}
	} while (more && st == CM_OK);
	return st;
}

enum cm_status wk_tc_feed(struct wk_tc *p, const char *text, size_t len, wk_tc_emit_fn emit,
			  void *ctx)
{
	/* in pieces the buffer holds: nothing is held past
	 * WK_TC_CALL_MAX_BYTES (a longer call is content) */
	while (len > 0) {
		size_t k = len < TC_FEED_PIECE ? len : TC_FEED_PIECE;
		enum cm_status st = cm_buf_append(&p->pend, text, k);

		if (st != CM_OK)
			return st;
		text += k;
		len -= k;
		st = run(p, 0, emit, ctx);
		if (st != CM_OK)
			return st;
	}
	return CM_OK;
}

enum cm_status wk_tc_finish(struct wk_tc *p, wk_tc_emit_fn emit, void *ctx)
{
	enum cm_status st = run(p, 1, emit, ctx);

	if (st == CM_OK && cm_buf_len(&p->pend))
		st = flush(p, cm_buf_len(&p->pend),
			   p->st == TC_THINK ? WK_TC_REASONING : WK_TC_CONTENT, emit, ctx);
	return st;
}
