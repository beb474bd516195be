/*
 * msg_eq.h - deep comparison of two struct proto_msg, shared by the proto
 * unit tests and the proto fuzzer (tests only, not part of the library).
 *
 * Every field is compared; strings and arrays by content (not pointer);
 * floats by their bit patterns, so a NaN equals the same NaN.
 */
#ifndef SLUICE_TESTS_PROTO_MSG_EQ_H
#define SLUICE_TESTS_PROTO_MSG_EQ_H

#include "proto/proto.h"

/* NULL when a and b are equal, else the name of the first field that differs. */
const char *tp_msg_diff(const struct proto_msg *a, const struct proto_msg *b);

#endif
