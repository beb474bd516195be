/*
 * status.c - names of enum cm_status values.
 */
#include "common/status.h"

#include <stdarg.h>
#include <stdio.h>

const char *cm_status_str(enum cm_status st)
{
	switch (st) {
	case CM_OK: return "ok";
	case CM_AGAIN: return "again";
	case CM_ENOMEM: return "out of memory";
	case CM_EINVAL: return "invalid argument";
	case CM_EIO: return "i/o error";
	case CM_ELIMIT: return "limit exceeded";
	case CM_ENOTFOUND: return "not found";
	case CM_EFORMAT: return "malformed input";
	case CM_EPROTO: return "protocol error";
	case CM_EPERM: return "permission denied";
	case CM_ETIMEDOUT: return "timed out";
	case CM_ECLOSED: return "closed";
	case CM_EUNSUPPORTED: return "unsupported";
	case CM_EEXIST: return "already exists";
	case CM_EINTERNAL: return "internal error";
	}
	return "unknown status";
}

enum cm_status cm_fail(char *err, size_t err_len, enum cm_status st, const char *fmt, ...)
{
	va_list ap;

	if (err && err_len > 0) {
		va_start(ap, fmt);
		vsnprintf(err, err_len, fmt, ap);
		va_end(ap);
	}
	return st;
}
