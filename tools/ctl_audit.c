/*
 * ctl_audit.c - `sluicectl audit list` and `sluicectl audit verify`.
 *
 * The records are those of gateway/gov/audit.h (stream <ns>audit); `verify`
 * walks the whole stream with gw_audit_verify_sync and exits 6
 * (CTL_EXIT_AUDIT_BROKEN) naming the first bad record when the chain does
 * not hold.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "tools/ctl_internal.h"

#define LIST_DEFAULT 100
#define LIST_MAX 10000

/* "2026-11-30T20:01:02.123456Z" */
static void fmt_time_us(int64_t us, char out[40])
{
	char s[32];

	ctl_fmt_time(us / 1000000, s);
	if (strlen(s) == 20) /* "YYYY-MM-DDTHH:MM:SSZ" */
		snprintf(out, 40, "%.19s.%06lldZ", s, (long long)(us % 1000000));
	else
		snprintf(out, 40, "%s", s);
}

/* A stream id "<ms>-<seq>": digits, one '-', digits. */
static int stream_id_ok(const char *s)
{
	size_t n = strlen(s), dash = 0;

	if (n == 0 || n >= GW_AUDIT_ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '-' && i > 0 && i + 1 < n)
			dash++;
		else if (s[i] < '0' || s[i] > '9')
			return 0;
	}
	return dash <= 1;
}

static int audit_list(struct ctl *ctl, int argc, char **argv)
{
	static const char *const head[] = {"SEQ", "TIME", "ACTOR", "ACTION", "TARGET",
					   "RESULT", "HASH"};
	char stream[CTL_KEYNAME_MAX], start[GW_AUDIT_ID_MAX + 2] = "-";
	long long count = LIST_DEFAULT;
	struct ctl_table *t = NULL;
	json_t *arr = NULL;
	redisReply *r = NULL;
	int rc;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
			if (ctl_parse_ll(argv[++i], 1, LIST_MAX, &count) != 0) {
				fprintf(stderr, "sluicectl: --count: expected 1 to %d, found \"%s\"\n",
					LIST_MAX, argv[i]);
				return CTL_EXIT_INVALID;
			}
		} else if (strcmp(argv[i], "--after") == 0 && i + 1 < argc) {
			if (!stream_id_ok(argv[++i])) {
				fprintf(stderr, "sluicectl: --after: expected a record id "
					"such as 1764532800000-0\n");
				return CTL_EXIT_INVALID;
			}
			snprintf(start, sizeof(start), "(%s", argv[i]);
		} else {
			fprintf(stderr, "sluicectl: audit list: unexpected \"%s\"\n", argv[i]);
			return CTL_EXIT_USAGE;
		}
	}
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	ctl_key(ctl, stream, "audit", NULL, NULL);
	r = ctl_cmd(ctl, "XRANGE %s %s + COUNT %lld", stream, start, count);
	if (!r || r->type != REDIS_REPLY_ARRAY) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	if (ctl->json)
		arr = json_array();
	else
		t = ctl_table_new(7, head);
	if (!arr && !t) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	for (size_t i = 0; i < r->elements; i++) {
		struct gw_audit_entry e;
		char when[40], seq[24], hash12[16];
		const char *cells[7];

		if (gw_audit_parse_entry(r->element[i], &e) != CM_OK) {
			/* Shown, not trusted: `audit verify` says what is wrong. */
			memset(&e, 0, sizeof(e));
			snprintf(e.action, sizeof(e.action), "(malformed)");
			if (r->element[i]->type == REDIS_REPLY_ARRAY &&
			    r->element[i]->elements > 0 &&
			    r->element[i]->element[0]->type == REDIS_REPLY_STRING)
				snprintf(e.id, sizeof(e.id), "%s", r->element[i]->element[0]->str);
		}
		fmt_time_us(e.time_us, when);
		if (arr) {
			json_t *o = json_object();

			json_object_set_new(o, "id", json_string(e.id));
			json_object_set_new(o, "seq", json_integer(e.seq));
			json_object_set_new(o, "time", json_string(when));
			json_object_set_new(o, "time_us", json_integer(e.time_us));
			json_object_set_new(o, "actor", json_string(e.actor));
			json_object_set_new(o, "action", json_string(e.action));
			json_object_set_new(o, "target", json_string(e.target));
			json_object_set_new(o, "result", json_string(e.result));
			json_object_set_new(o, "prev", json_string(e.prev));
			json_object_set_new(o, "hash", json_string(e.hash));
			json_array_append_new(arr, o);
			continue;
		}
		snprintf(seq, sizeof(seq), "%lld", (long long)e.seq);
		snprintf(hash12, sizeof(hash12), "%.12s", e.hash);
		cells[0] = seq;
		cells[1] = when;
		cells[2] = e.actor;
		cells[3] = e.action;
		cells[4] = e.target;
		cells[5] = e.result;
		cells[6] = hash12;
		if (ctl_table_add(t, cells) != 0) {
			rc = CTL_EXIT_REDIS;
			goto out;
		}
	}
	ctl_emit(&arr, t);
out:
	json_decref(arr);
	ctl_table_free(t);
	if (r)
		freeReplyObject(r);
	return rc;
}

static int audit_verify(struct ctl *ctl, int argc, char **argv)
{
	struct gw_audit_verify v;
	enum cm_status st;
	int rc;

	(void)argv;
	if (argc != 0) {
		fprintf(stderr, "sluicectl: audit verify: expected no argument\n");
		return CTL_EXIT_USAGE;
	}
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	st = gw_audit_verify_sync(ctl->rc, ctl->ns, &v);
	if (st != CM_OK) {
		fprintf(stderr, "sluicectl: audit verify: reading the log failed (%s)\n",
			cm_status_str(st));
		return CTL_EXIT_REDIS;
	}
	if (ctl->json) {
		json_t *o = json_object();

		json_object_set_new(o, "intact", json_boolean(v.intact));
		json_object_set_new(o, "records", json_integer(v.records));
		if (v.intact) {
			json_object_set_new(o, "head", json_string(v.head_hash));
		} else {
			json_object_set_new(o, "bad_record", v.bad_id[0] ? json_string(v.bad_id)
									 : json_null());
			json_object_set_new(o, "bad_seq", json_integer(v.bad_seq));
			json_object_set_new(o, "reason", json_string(v.reason));
		}
		ctl_print_json(o);
	}
	if (!v.intact) {
		if (v.bad_id[0])
			fprintf(stderr, "sluicectl: audit log BROKEN at record %s (seq %lld): %s\n",
				v.bad_id, (long long)v.bad_seq, v.reason);
		else
			fprintf(stderr, "sluicectl: audit log BROKEN after %lld records: %s\n",
				(long long)v.records, v.reason);
		return CTL_EXIT_AUDIT_BROKEN;
	}
	if (!ctl->json)
		printf("audit log intact: %lld records, head %s\n", (long long)v.records,
		       v.records ? v.head_hash : "(empty)");
	return CTL_EXIT_OK;
}

int ctl_audit_cmd(struct ctl *ctl, int argc, char **argv)
{
	if (argc >= 1 && strcmp(argv[0], "list") == 0)
		return audit_list(ctl, argc - 1, argv + 1);
	if (argc >= 1 && strcmp(argv[0], "verify") == 0)
		return audit_verify(ctl, argc - 1, argv + 1);
	fprintf(stderr, "sluicectl: audit: expected list or verify\n");
	return CTL_EXIT_USAGE;
}
