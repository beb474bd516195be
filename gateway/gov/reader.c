/*
 * reader.c - governance records out of Redis replies (see reader.h).
 */
#include "gateway/gov/reader.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "gateway/gov/records.h"

const char *gw_gov_hash_get(const redisReply *h, const char *field)
{
	if (!h || h->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t i = 0; i + 1 < h->elements; i += 2) {
		const redisReply *k = h->element[i], *v = h->element[i + 1];

		if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
		    strcmp(k->str, field) == 0)
			return v->str;
	}
	return NULL;
}

int gw_gov_decimal(const char *s, size_t len, int64_t *out)
{
	int64_t v = 0;

	if (len == 0 || len > 18)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

long long gw_gov_number(const char *s, long long def)
{
	char *end;
	long long v;

	if (!s || !*s)
		return def;
	v = strtoll(s, &end, 10);
	return *end ? def : v;
}

long long gw_gov_hash_ll(const redisReply *h, const char *field, long long def)
{
	return gw_gov_number(gw_gov_hash_get(h, field), def);
}

static int rd_cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char **gw_gov_sorted_members(const redisReply *r, int (*keep)(const char *s),
				   size_t *n)
{
	const char **v;

	*n = 0;
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return NULL;
	v = cm_calloc(r->elements + 1, sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];

		if (e->type == REDIS_REPLY_STRING && (!keep || keep(e->str)))
			v[(*n)++] = e->str;
	}
	qsort(v, *n, sizeof(*v), rd_cmp_str);
	return v;
}

json_t *gw_gov_record_json(const redisReply *h, const char *const *skip)
{
	json_t *o = json_object();

	for (size_t i = 0; h && h->type == REDIS_REPLY_ARRAY && i + 1 < h->elements; i += 2) {
		const redisReply *k = h->element[i], *v = h->element[i + 1];
		int f, hidden = 0;

		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			continue;
		for (int j = 0; skip && skip[j]; j++)
			hidden |= strcmp(k->str, skip[j]) == 0;
		if (hidden)
			continue;
		f = gw_gov_field_by_name(k->str);
		if (f >= 0 || strcmp(k->str, "created") == 0 || strcmp(k->str, "expires") == 0 ||
		    strcmp(k->str, "last_used") == 0 || strcmp(k->str, "revoked_at") == 0)
			json_object_set_new(o, k->str, json_integer(strtoll(v->str, NULL, 10)));
		else if (strcmp(k->str, "disabled") == 0 || strcmp(k->str, "revoked") == 0)
			json_object_set_new(o, k->str, json_boolean(strcmp(v->str, "1") == 0));
		else
			json_object_set_new(o, k->str, json_string(v->str));
	}
	return o;
}

void gw_gov_quotas_json(json_t *o, const redisReply *h)
{
	for (int f = 0; f < GW_GOV_F_COUNT; f++) {
		const char *v = gw_gov_hash_get(h, gw_gov_fields[f].field);

		json_object_set_new(o, gw_gov_fields[f].field,
				    v ? json_integer(strtoll(v, NULL, 10)) : json_null());
	}
}
