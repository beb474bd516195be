/*
 * harness.c - processes and files for integration tests (see harness.h).
 */
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "common/clock.h"
#include "gateway/gov/apikey.h"

static char tmp[256];

const char *h_tmpdir(void)
{
	if (!tmp[0]) {
		/* a peer that closes (a gateway restarted, a refusal) must fail
		 * the write, not kill the test (every fixture starts here) */
		signal(SIGPIPE, SIG_IGN);
		snprintf(tmp, sizeof(tmp), "/tmp/sluice-it-XXXXXX");
		if (!mkdtemp(tmp)) {
			tmp[0] = '\0';
			return NULL;
		}
	}
	return tmp;
}

void h_cleanup(void)
{
	char cmd[300];

	if (!tmp[0] || getenv("SLUICE_KEEP_TMP"))
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmp);
	tmp[0] = '\0';
}

const char *h_bin(const char *rel)
{
	static char buf[4][512];
	static int i;
	const char *bd = getenv("SLUICE_BUILD_DIR");

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", bd ? bd : ".", rel);
	return buf[i];
}

const char *h_model(const char *preset, const char *type, const char *arch)
{
	return h_model_template(preset, type, arch, NULL);
}

const char *h_model_template(const char *preset, const char *type, const char *arch,
			     const char *tmpl)
{
	static char paths[8][512];
	static int n;
	char path[512];
	struct h_proc p;
	char *argv[16];
	int i = 0;

	snprintf(path, sizeof(path), "%s/%s-%s-%s%s%s.gguf", h_tmpdir(), preset, type, arch,
		 tmpl ? "-" : "", tmpl ? tmpl : "");
	for (int k = 0; k < n; k++)
		if (strcmp(paths[k], path) == 0)
			return paths[k];
	argv[i++] = (char *)h_bin("tools/sluice-model");
	argv[i++] = "synth";
	argv[i++] = "--preset";
	argv[i++] = (char *)preset;
	argv[i++] = "--type";
	argv[i++] = (char *)type;
	argv[i++] = "--arch";
	argv[i++] = (char *)arch;
	argv[i++] = "--seed";
	argv[i++] = "7";
	if (tmpl) {
		argv[i++] = "--template";
		argv[i++] = (char *)tmpl;
	}
	argv[i++] = "-o";
	argv[i++] = path;
	argv[i] = NULL;
	if (h_spawn(&p, "synth", argv) != 0)
		return NULL;
	{
		int status;

		if (waitpid(p.pid, &status, 0) != p.pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			return NULL;
	}
	if (n >= 8)
		return NULL;
	snprintf(paths[n], sizeof(paths[n]), "%s", path);
	return paths[n++];
}

int h_spawn(struct h_proc *p, const char *name, char *const argv[])
{
	pid_t pid;

	snprintf(p->log, sizeof(p->log), "%s/%s.log", h_tmpdir(), name);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
			close(fd);
		}
		{
			/* a worker's expert cache (worker.expert_cache_dir's
			 * default) under the test's directory, not $HOME */
			char xdg[300];

			snprintf(xdg, sizeof(xdg), "%s/xdg-cache", h_tmpdir());
			setenv("XDG_CACHE_HOME", xdg, 1);
			unsetenv("CACHE_DIRECTORY");
		}
		execv(argv[0], argv);
		_exit(127);
	}
	p->pid = pid;
	return 0;
}

int h_worker_start(struct h_proc *p, const char *name, const char *config_json)
{
	char path[512];
	FILE *f;
	char *argv[5];

	snprintf(path, sizeof(path), "%s/%s.json", h_tmpdir(), name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(config_json, f);
	fclose(f);
	argv[0] = (char *)h_bin("worker/sluice-worker");
	argv[1] = "serve";
	argv[2] = "--config";
	argv[3] = path;
	argv[4] = NULL;
	return h_spawn(p, name, argv);
}

int h_worker_start_model(struct h_proc *p, const char *name, const char *model,
			 const char *extra, char *sock, size_t sock_len)
{
	char cfg[4096];

	snprintf(sock, sock_len, "%s/%s.sock", h_tmpdir(), name);
	snprintf(cfg, sizeof(cfg), "{\"worker\": {\"model\": \"%s\", \"socket\": \"%s\", %s}}",
		 model, sock, extra);
	return h_worker_start(p, name, cfg);
}

int h_signal(struct h_proc *p, int sig)
{
	if (p->pid <= 0) {
		errno = ESRCH;
		return -1;
	}
	return kill(p->pid, sig);
}

int h_stop_service(struct h_proc *gateway, struct h_proc *workers, size_t n,
		   struct h_proc *redis)
{
	int rc = h_stop(gateway, 10000);

	for (size_t i = 0; i < n; i++)
		h_stop(&workers[i], 10000);
	h_stop(redis, 10000);
	if (rc != 0) {
		fprintf(stderr, "gateway exit status %d; log kept: %s\n", rc, gateway->log);
		return -1;
	}
	h_cleanup();
	return 0;
}

int h_alive(struct h_proc *p)
{
	int status;

	if (p->pid <= 0)
		return 0;
	if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
		p->pid = 0;
		return 0;
	}
	return 1;
}

int h_gateway_ports(struct h_proc *gw, int timeout_ms, int *port, int *admin_port)
{
	int64_t end = h_now_ms() + timeout_ms;

	while (h_now_ms() < end) {
		size_t len;
		char *log = h_read_file(gw->log, &len);
		char *p = log ? strstr(log, "sluice-gateway listening port=") : NULL;

		if (p && sscanf(p, "sluice-gateway listening port=%d admin_port=%d", port,
				admin_port) == 2) {
			free(log);
			return 0;
		}
		free(log);
		if (!h_alive(gw))
			return -1;
		h_pause_ms(20);
	}
	return -1;
}

int h_stop(struct h_proc *p, int timeout_ms)
{
	int64_t deadline = cm_mono_ns() + (int64_t)timeout_ms * CM_NS_PER_MS;
	int status;

	if (p->pid <= 0)
		return -1;
	kill(p->pid, SIGTERM);
	while (cm_mono_ns() < deadline) {
		pid_t r = waitpid(p->pid, &status, WNOHANG);

		if (r == p->pid) {
			p->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		poll(NULL, 0, 10); /* bounded wait for the child to exit */
	}
	kill(p->pid, SIGKILL);
	waitpid(p->pid, &status, 0);
	p->pid = 0;
	return -1;
}

int h_redis_start(struct h_proc *p, const char *sock, const char *dir, int timeout_ms)
{
	char *argv[] = { "/usr/bin/redis-server", "--port", "0", "--unixsocket", (char *)sock,
			 "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
			 "--dir", (char *)dir, NULL };
	int64_t end = h_now_ms() + timeout_ms;

	if (access(argv[0], X_OK) != 0)
		argv[0] = "/usr/local/bin/redis-server";
	if (access(argv[0], X_OK) != 0)
		return 77;
	if (h_spawn(p, "redis", argv) != 0)
		return -1;
	while (h_now_ms() < end) {
		redisContext *c = redisConnectUnix(sock);

		if (c && !c->err) {
			redisFree(c);
			return 0;
		}
		if (c)
			redisFree(c);
		h_pause_ms(20);
	}
	return -1;
}

int64_t h_now_ms(void)
{
	return cm_mono_ns() / CM_NS_PER_MS;
}

void h_pause_ms(int ms)
{
	poll(NULL, 0, ms);
}

char *h_run_capture(const char *cmd, int *status)
{
	FILE *f = popen(cmd, "r");
	char *buf;
	size_t n = 0, r;

	if (!f)
		return NULL;
	buf = calloc(1, 1 << 20);
	if (!buf) {
		*status = pclose(f);
		return NULL;
	}
	while ((r = fread(buf + n, 1, (1 << 20) - 1 - n, f)) > 0)
		n += r;
	*status = pclose(f);
	return buf;
}

int h_write_file(const char *path, const char *text, unsigned mode)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	fclose(f);
	return chmod(path, (mode_t)mode);
}

double h_metric(const char *text, const char *series)
{
	const char *p = text;
	size_t n = strlen(series);

	while ((p = strstr(p, series)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return atof(p + n + 1);
		p += n;
	}
	return -1;
}

char *h_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = '\0';
		if (len)
			*len = (size_t)n;
	}
	return buf;
}

/* ---- sluicectl and HTTP clients ------------------------------------------- */

static char h_ctl_redis[600], h_ctl_pepper[600];

void h_ctl_setup(const char *redis_sock, const char *pepper_file)
{
	snprintf(h_ctl_redis, sizeof(h_ctl_redis), "%s", redis_sock);
	snprintf(h_ctl_pepper, sizeof(h_ctl_pepper), "%s", pepper_file);
}

static int h_ctl_v(char *out, size_t size, const char *fmt, va_list ap, char *args,
		   size_t args_len)
{
	char cmd[2048];
	int st;
	char *o;

	vsnprintf(args, args_len, fmt, ap);
	snprintf(cmd, sizeof(cmd), "%s --redis unix://%s --pepper-file %s %s 2>&1",
		 h_bin("tools/sluicectl"), h_ctl_redis, h_ctl_pepper, args);
	o = h_run_capture(cmd, &st);
	assert_non_null(o);
	if (out && size)
		snprintf(out, size, "%s", o);
	if (st != 0 && !out)
		fprintf(stderr, "sluicectl %s: %s\n", args, o);
	free(o);
	return st;
}

int h_ctl_rc(char *out, size_t size, const char *fmt, ...)
{
	char args[512];
	va_list ap;
	int st;

	va_start(ap, fmt);
	st = h_ctl_v(out, size, fmt, ap, args, sizeof(args));
	va_end(ap);
	return st;
}

void h_ctl(char *out, size_t size, const char *fmt, ...)
{
	char args[512], o[65536];
	va_list ap;
	int st;

	va_start(ap, fmt);
	st = h_ctl_v(o, sizeof(o), fmt, ap, args, sizeof(args));
	va_end(ap);
	if (st != 0)
		fprintf(stderr, "sluicectl %s: %s\n", args, o);
	assert_int_equal(st, 0);
	if (out && size)
		snprintf(out, size, "%s", o);
}

void h_issue_key(const char *who, char key[64], char id[32])
{
	char o[2048], *p;

	h_ctl(o, sizeof(o), "key issue %s", who);
	p = strstr(o, "key:     ");
	assert_non_null(p);
	p += 9;
	snprintf(key, 64, "%.*s", (int)strcspn(p, "\n"), p);
	assert_int_equal(strlen(key), GW_KEY_LEN);
	if (id) {
		p = strstr(o, "key id:  ");
		assert_non_null(p);
		p += 9;
		snprintf(id, 32, "%.*s", (int)strcspn(p, "\n"), p);
	}
}

int h_http(int p, const char *method, const char *path, const char *auth,
	   const char *data, char **body, int timeout_ms)
{
	struct sockaddr_in sa;
	char head[1024];
	char *buf = NULL;
	size_t cap = 0, n = 0;
	int fd, code = -1, len;

	if (body)
		*body = NULL;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)p);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto out;
	if (timeout_ms > 0) {
		struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	len = snprintf(head, sizeof(head),
		       "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
		       "%s%s%s"
		       "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
		       method, path, auth ? "Authorization: Bearer " : "", auth ? auth : "",
		       auth ? "\r\n" : "", data ? strlen(data) : 0);
	if (write(fd, head, (size_t)len) != len)
		goto out;
	if (data && write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		goto out;
	for (;;) {
		ssize_t r;

		if (cap - n < 4096) {
			cap = cap ? cap * 2 : 16384;
			buf = realloc(buf, cap + 1);
			assert_non_null(buf);
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			code = -2;
			goto out;
		}
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	if (buf) {
		buf[n] = 0;
		if (sscanf(buf, "HTTP/1.1 %d", &code) != 1)
			code = -1;
		if (body) {
			char *b = strstr(buf, "\r\n\r\n");

			*body = strdup(b ? b + 4 : "");
		}
	}
out:
	free(buf);
	close(fd);
	return code;
}
