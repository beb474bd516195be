/*
 * status.h - the one status enum every fallible function in Sluice returns.
 *
 * 0 is success; CM_AGAIN means "not yet, call again with more input or
 * later" and is not an error; every error is negative.  Functions that can
 * fail are marked CM_WUR so that a dropped status is a compile error.
 * Errors carry no text of their own: the caller that knows the context
 * writes the message ("expected X, found Y").
 */
#ifndef SLUICE_COMMON_STATUS_H
#define SLUICE_COMMON_STATUS_H

#include <stddef.h>

#define CM_WUR __attribute__((warn_unused_result))
#define CM_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))

enum cm_status {
	CM_OK = 0,
	CM_AGAIN = 1,          /* need more input / retry later; not an error */
	CM_ENOMEM = -1,        /* allocation failed */
	CM_EINVAL = -2,        /* invalid argument or value */
	CM_EIO = -3,           /* system call or I/O failure */
	CM_ELIMIT = -4,        /* a configured or built-in limit was hit */
	CM_ENOTFOUND = -5,     /* no such key, file, entry */
	CM_EFORMAT = -6,       /* malformed input (file, JSON, text) */
	CM_EPROTO = -7,        /* protocol violation by the peer */
	CM_EPERM = -8,         /* not allowed (credentials, permissions) */
	CM_ETIMEDOUT = -9,     /* a deadline passed */
	CM_ECLOSED = -10,      /* peer or resource closed */
	CM_EUNSUPPORTED = -11, /* well-formed but not supported (type, arch) */
	CM_EEXIST = -12,       /* already exists */
	CM_EINTERNAL = -13,    /* a broken invariant: a bug, reported not hidden */
};

/* Short stable name of a status ("ok", "again", "out of memory", ...). */
const char *cm_status_str(enum cm_status st);

/* Formats a message into err[err_len] (nothing when err is NULL or
 * err_len 0) and returns st: `return cm_fail(err, len, CM_EINVAL, ...);`. */
enum cm_status cm_fail(char *err, size_t err_len, enum cm_status st, const char *fmt, ...)
	CM_PRINTF(4, 5);

#endif
