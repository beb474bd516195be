/*
 * schema.h - JSON Schema to grammar: the text a model may write is exactly
 * the JSON documents valid against the schema (within what is supported),
 * serialised with JSON's whitespace (or none, in compact mode).
 *
 * Supported: boolean schemas; type (one or a list); enum and const;
 * properties (emitted in the schema's order), required, additionalProperties
 * (false, true or a schema; extra properties come after the listed ones and
 * their names differ from the listed names), patternProperties (one
 * pattern), minProperties, maxProperties; items, prefixItems,
 * additionalItems, minItems, maxItems; minLength, maxLength, pattern
 * (regex.h; with lengths and with other patterns through length.h), format
 * (date, time, date-time, uuid, email, uri, ipv4, hostname; other formats
 * are annotations); minimum, maximum, exclusiveMinimum, exclusiveMaximum
 * (integer and fractional bounds, exact; bounded numbers are written
 * without exponent); anyOf, oneOf (exclusive branches; overlapping ones
 * narrowed until exclusive, schema_oneof.c), allOf (merged into one
 * schema); not, dependencies and if/then/else where they rewrite exactly
 * (schema_rewrite.c); local  ("#", "#/definitions/...",
 * "#//...", JSON Pointer), recursive.  Keywords that assert something
 * we cannot enforce are refused with CM_EUNSUPPORTED naming the keyword
 * and its path ("not at /properties/a"), never ignored; unknown keywords
 * are annotations.  Narrowing (oneOf, patternProperties beside
 * additionalProperties) only removes documents: everything written is
 * valid.
 * Unsatisfiable schemas are CM_EINVAL "unsatisfiable".
 */
#ifndef SLUICE_WORKER_GRAMMAR_SCHEMA_H
#define SLUICE_WORKER_GRAMMAR_SCHEMA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/grammar/grammar.h"

struct wk_schema_opts {
	int compact;          /* 1: no whitespace between tokens */
	uint32_t max_depth;   /* schema nesting (worker.grammar_schema_depth) */
};
void wk_schema_opts_default(struct wk_schema_opts *o);

/* Adds the rules for `schema` to b; *root is the rule to build from. */
enum cm_status wk_schema_compile(struct wk_gram_b *b, const json_t *schema,
				 const struct wk_schema_opts *o, uint32_t *root, char *err,
				 size_t err_len) CM_WUR;

#endif
