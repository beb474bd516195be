/*
 * clock.h - time helpers.  All durations in Sluice are int64 nanoseconds
 * unless a field name says otherwise (_ms, _s).  Monotonic time is for
 * measuring; wall time only for timestamps shown to people.
 */
#ifndef SLUICE_COMMON_CLOCK_H
#define SLUICE_COMMON_CLOCK_H

#include <stdint.h>

#define CM_NS_PER_US 1000LL
#define CM_NS_PER_MS 1000000LL
#define CM_NS_PER_S 1000000000LL

/* CLOCK_MONOTONIC in ns: for durations and deadlines. */
int64_t cm_mono_ns(void);
/* CLOCK_REALTIME in ns since the Unix epoch: for log timestamps. */
int64_t cm_wall_ns(void);
/* Writes "2026-11-30T20:01:02.123Z" (24 chars + NUL) into out[32]. */
void cm_wall_iso8601(int64_t wall_ns, char out[32]);

#endif
