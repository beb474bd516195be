/*
 * samples.h - one typical, fully populated message of every proto type,
 * for the proto unit tests (tests only).
 *
 * Every field holds a distinct non-zero value where its domain allows, so a
 * field dropped or swapped by the codec shows up in a comparison.  Strings
 * include multi-byte UTF-8.  The messages point into static storage.
 */
#ifndef SLUICE_TESTS_PROTO_SAMPLES_H
#define SLUICE_TESTS_PROTO_SAMPLES_H

#include "proto/proto.h"

/* The proto types in wire order of their values. */
extern const uint16_t tp_types[];
extern const int tp_n_types;

/* Fills *m with the sample of type t (one of tp_types). */
void tp_sample(uint16_t t, struct proto_msg *m);

/* A proto_str over a C string literal. */
struct proto_str tp_str(const char *s);

#endif
