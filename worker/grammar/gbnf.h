/*
 * gbnf.h - the grammar text format (the `grammar` request field): GBNF as
 * llama.cpp's server accepts it, so that grammars written for it work here.
 *
 *   root   ::= object            # the start rule is always "root"
 *   object ::= "{" ws pair ("," ws pair)* "}"
 *   pair   ::= [a-z]+ ":" ws ( "true" | "false" | num )
 *   num    ::= "-"? [0-9]+ ("." [0-9]+)?
 *   ws     ::= [ \t\n]*
 *
 * Names are [A-Za-z0-9_-]+; a rule is `name ::= alternatives` and runs
 * until the next `name ::=` or the end of the text (newlines are spaces);
 * `#` starts a comment to the end of the line.  Terminals: "literal"
 * strings and [classes] (ranges, ^ negation) with the escapes \n \r \t \\
 * \" \] \[ \- \xHH \uHHHH \UHHHHHHHH; `.` is any character.  Operators:
 * grouping ( ), alternation |, repetition * + ? {m} {m,} {m,n}.
 * Errors name the line and column ("line 3, column 14: expected '::='").
 */
#ifndef SLUICE_WORKER_GRAMMAR_GBNF_H
#define SLUICE_WORKER_GRAMMAR_GBNF_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/grammar/grammar.h"

#define WK_GBNF_MAX_REPEAT 100000u /* bound of {m,n} */

/* Adds the rules of `text` to b; *root is rule "root".  CM_EINVAL with
 * "line L, column C: ..." for syntax errors and undefined or missing
 * rules; CM_ENOMEM / CM_ELIMIT when the builder ran out. */
enum cm_status wk_gbnf_parse(struct wk_gram_b *b, const char *text, size_t len, uint32_t *root,
			     char *err, size_t err_len) CM_WUR;

#endif
