/*
 * secret.c - reading a small secret from a file (see secret.h).
 */
#include "common/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crypto.h"

enum cm_status cm_secret_read(const char *path, const char *what, uint8_t *buf, size_t cap,
			      size_t *len, char *err, size_t errlen)
{
	enum cm_status st = CM_OK;
	struct stat sb;
	size_t n = 0, over = 0;
	uint8_t extra = 0;
	int fd;

	*len = 0;
	if (errlen)
		err[0] = '\0';
	/* O_NONBLOCK: a FIFO must be refused below, not wait for a writer */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		st = errno == ENOENT ? CM_ENOTFOUND : errno == EACCES ? CM_EPERM : CM_EIO;
		snprintf(err, errlen, "%s %s: cannot open: %s", what, path, strerror(errno));
		return st;
	}
	if (fstat(fd, &sb) != 0) {
		snprintf(err, errlen, "%s %s: fstat: %s", what, path, strerror(errno));
		st = CM_EIO;
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s %s: expected a regular file", what, path);
		st = CM_EFORMAT;
		goto out;
	}
	/* as PostgreSQL's key files: owner only, or root's with group read
	 * (a Kubernetes secret mounted with fsGroup is root:fsGroup 0440) */
	if ((sb.st_mode & 077) && !(sb.st_uid == 0 && (sb.st_mode & 037) == 0)) {
		snprintf(err, errlen,
			 "%s %s has mode %04o: expected no group or other permissions (chmod 600 %s), "
			 "or at most group read when owned by root",
			 what, path, (unsigned)(sb.st_mode & 07777), path);
		st = CM_EPERM;
		goto out;
	}
	/* bytes past cap are counted; one newline there is still the end */
	for (;;) {
		uint8_t *dst = n < cap ? buf + n : &extra;
		ssize_t r = read(fd, dst, n < cap ? cap - n : 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "%s %s: read: %s", what, path, strerror(errno));
			st = CM_EIO;
			goto out;
		}
		if (r == 0)
			break;
		if (n >= cap)
			over++;
		else
			n += (size_t)r;
		if (over > 1 || (over == 1 && extra != '\n')) {
			snprintf(err, errlen, "%s %s: expected at most %zu bytes, found more", what,
				 path, cap);
			st = CM_EFORMAT;
			goto out;
		}
	}
	if (over == 0 && n > 0 && buf[n - 1] == '\n') {
		n--;
		if (n > 0 && buf[n - 1] == '\r')
			n--;
	}
	*len = n;
out:
	cm_wipe(&extra, sizeof(extra));
	if (st != CM_OK)
		cm_wipe(buf, cap);
	close(fd);
	return st;
}
