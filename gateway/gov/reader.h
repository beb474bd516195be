/*
 * reader.h - reading governance records out of Redis replies, once for
 * both front ends: the admin API (gateway/admin/reads.c, async) and
 * sluicectl (tools/ctl_*.c, sync) send their own HGETALL / SMEMBERS and
 * interpret the replies here, so both show the same fields the same way.
 *
 * Owns nothing beyond what it returns; pure, any thread.
 */
#ifndef SLUICE_GATEWAY_GOV_READER_H
#define SLUICE_GATEWAY_GOV_READER_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <jansson.h>

/* A strict non-negative decimal of 1..18 digits (s[0..len), no sign, no
 * space) into *out: 0, or -1 when s is anything else. */
int gw_gov_decimal(const char *s, size_t len, int64_t *out);
/* A decimal number (strtoll, the whole string), `def` when absent, empty
 * or not a number. */
long long gw_gov_number(const char *s, long long def);

/* The value of `field` in an HGETALL reply, NULL when absent (or not text). */
const char *gw_gov_hash_get(const redisReply *h, const char *field);
/* The same as a decimal number, `def` when absent or not a number. */
long long gw_gov_hash_ll(const redisReply *h, const char *field, long long def);

/*
 * The string members of an SMEMBERS reply, sorted by strcmp, that pass
 * `keep` (NULL: all): a cm_calloc'ed array of pointers into the reply
 * (NULL-terminated; free with cm_free, the reply keeps the strings).
 * NULL when the reply is not an array or memory runs out.
 */
const char **gw_gov_sorted_members(const redisReply *r, int (*keep)(const char *s),
				   size_t *n);

/*
 * A record (HGETALL reply) as a JSON object: quota fields and times as
 * numbers, flags as booleans, the rest as strings; fields named in the
 * NULL-terminated `skip` (secrets: salt, hmac) are left out.
 */
json_t *gw_gov_record_json(const redisReply *h, const char *const *skip);

/* The quota fields of a record as numbers (null when unset), added to o. */
void gw_gov_quotas_json(json_t *o, const redisReply *h);

#endif
