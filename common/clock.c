/*
 * clock.c - monotonic and wall clocks in nanoseconds.
 */
#include "common/clock.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t cm_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * CM_NS_PER_S + ts.tv_nsec;
}

int64_t cm_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * CM_NS_PER_S + ts.tv_nsec;
}

void cm_wall_iso8601(int64_t wall_ns, char out[32])
{
	time_t secs = (time_t)(wall_ns / CM_NS_PER_S);
	int ms = (int)((wall_ns % CM_NS_PER_S) / CM_NS_PER_MS);
	struct tm tm;

	gmtime_r(&secs, &tm);
	char tmp[64];

	snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
		 (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100,
		 tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100,
		 tm.tm_sec % 100, ms % 1000);
	memcpy(out, tmp, 31);
	out[31] = '\0';
}
