/*
 * names.c - the protocol's names and tables: error and message type
 * names for logs, the STATS histogram bounds (see proto.h).
 */
#include "proto/proto.h"

#include <string.h>

const int64_t proto_hist_bounds_ns[PROTO_HIST_BUCKETS] = {
	INT64_C(1000000),     INT64_C(2000000),     INT64_C(5000000),
	INT64_C(10000000),    INT64_C(20000000),    INT64_C(50000000),
	INT64_C(100000000),   INT64_C(200000000),   INT64_C(500000000),
	INT64_C(1000000000),  INT64_C(2000000000),  INT64_C(5000000000),
	INT64_C(10000000000), INT64_C(20000000000), INT64_C(30000000000),
	INT64_MAX,
};

const char *proto_error_str(enum proto_error e)
{
	switch (e) {
	case PROTO_ERR_NONE:
		return "no error";
	case PROTO_ERR_MAGIC:
		return "bad magic (expected \"SLP1\")";
	case PROTO_ERR_VERSION:
		return "unsupported protocol version";
	case PROTO_ERR_TYPE:
		return "unknown message type";
	case PROTO_ERR_FLAGS:
		return "flag bits not defined for the message type";
	case PROTO_ERR_TOO_LONG:
		return "payload length above the maximum frame size";
	case PROTO_ERR_FIELD_OVERRUN:
		return "field runs past the end of the payload";
	case PROTO_ERR_COUNT_OVERRUN:
		return "list count larger than the bytes left";
	case PROTO_ERR_COUNT_LIMIT:
		return "list count above its hard limit";
	case PROTO_ERR_UTF8:
		return "string field is not valid UTF-8";
	case PROTO_ERR_TRAILING:
		return "bytes left after the last field";
	case PROTO_ERR_VALUE:
		return "field value outside its domain";
	}
	return "unknown proto error";
}

const char *proto_type_str(enum proto_type t)
{
	switch (t) {
	case PROTO_HELLO:
		return "HELLO";
	case PROTO_PING:
		return "PING";
	case PROTO_PONG:
		return "PONG";
	case PROTO_DRAIN:
		return "DRAIN";
	case PROTO_EMBED:
		return "EMBED";
	case PROTO_EMBEDDING:
		return "EMBEDDING";
	case PROTO_ERROR:
		return "ERROR";
	case PROTO_SUBMIT:
		return "SUBMIT";
	case PROTO_CANCEL:
		return "CANCEL";
	case PROTO_TOKEN:
		return "TOKEN";
	case PROTO_DONE:
		return "DONE";
	case PROTO_STATS:
		return "STATS";
	}
	return "unknown";
}

const char *proto_constraint_str(uint8_t kind)
{
	switch (kind) {
	case PROTO_CONSTRAINT_JSON_OBJECT:
		return "json_object";
	case PROTO_CONSTRAINT_JSON_SCHEMA:
		return "json_schema";
	case PROTO_CONSTRAINT_GRAMMAR:
		return "grammar";
	}
	return "none";
}

/* ---- chat roles ---- */

const char *const proto_role_names[PROTO_ROLE_COUNT] = {
	[PROTO_ROLE_SYSTEM] = "system",
	[PROTO_ROLE_USER] = "user",
	[PROTO_ROLE_ASSISTANT] = "assistant",
	[PROTO_ROLE_TOOL] = "tool",
};

int proto_role_parse(const char *s, size_t len)
{
	for (int i = 0; s && i < PROTO_ROLE_COUNT; i++)
		if (len == strlen(proto_role_names[i]) &&
		    memcmp(s, proto_role_names[i], len) == 0)
			return i;
	return -1;
}
