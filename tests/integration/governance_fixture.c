/*
 * governance_fixture.c - the processes of the governance test
 * (test_governance.c; see governance_fixture.h).
 */
#include "tests/integration/governance_fixture.h"

#include <errno.h>
#include <glob.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "common/clock.h"
#include "gateway/gov/apikey.h"
#include "tests/integration/harness.h"


struct h_proc gvt_redis, gvt_worker, gvt_gw[N_GW];
char gvt_dir[512], gvt_redis_sock[600], gvt_worker_sock[600], gvt_pepper[600], gvt_creds[600];
int gvt_port[N_GW], gvt_admin_port[N_GW];
char gvt_key_u[64];

int64_t gvt_now_us(void)
{
	return cm_mono_ns() / 1000;
}

int gvt_http(int p, const char *method, const char *path, const char *auth,
		const char *data, char **body)
{
	return h_http(p, method, path, auth, data, body, 0);
}

/* ---- setup ----------------------------------------------------------- */

int gvt_start_redis(void)
{
	return h_redis_start(&gvt_redis, gvt_redis_sock, gvt_dir, DEADLINE_MS);
}

int gvt_start_gateway(int i)
{
	char path[700], name[32];
	char *argv[4];
	FILE *f;
	int64_t end = h_now_ms() + DEADLINE_MS;

	snprintf(path, sizeof(path), "%s/gateway%d.json", gvt_dir, i);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"{\"gateway\": {\"listen_addr\": \"127.0.0.1\", \"port\": 0, \"plain_http\": true,"
		" \"admin_addr\": \"127.0.0.1\", \"admin_port\": 0, \"pepper_file\": \"%s\","
		" \"admin_credentials_file\": \"%s\", \"log_level\": \"debug\","
		" \"workers\": [{\"name\": \"w0\", \"socket\": \"%s\", \"model\": \"tiny\"}],"
		" \"ping_interval_ms\": 500, \"stats_timeout_ms\": 3000,"
		" \"queue\": {\"tenant_max\": 100, \"global_max\": 400, \"timeout_ms\": \"60s\"},"
		" \"redis\": {\"url\": \"unix://%s\", \"auth_cache_ttl_ms\": 5000,"
		"   \"lease_ttl_ms\": 1500, \"outage_quota_fraction\": 0.5}}}\n",
		gvt_pepper, gvt_creds, gvt_worker_sock, gvt_redis_sock);
	fclose(f);
	static int starts;

	/* a new log per start: the port line is read from it */
	snprintf(name, sizeof(name), "gateway%d-%d", i, starts++);
	argv[0] = (char *)h_bin("gateway/sluice-gateway");
	argv[1] = "--config";
	argv[2] = path;
	argv[3] = NULL;
	if (h_spawn(&gvt_gw[i], name, argv) != 0 ||
	    h_gateway_ports(&gvt_gw[i], (int)(end - h_now_ms()), &gvt_port[i],
			    &gvt_admin_port[i]) != 0)
		return -1;
	while (h_now_ms() < end) {
		if (gvt_http(gvt_port[i], "GET", "/readyz", NULL, NULL, NULL) == 200)
			return 0;
		h_pause_ms(50);
	}
	return -1;
}

int gvt_setup(void **state)
{
	const char *model;
	char worker_cfg[2048];
	int rc;

	(void)state;
	snprintf(gvt_dir, sizeof(gvt_dir), "%s", h_tmpdir());
	snprintf(gvt_redis_sock, sizeof(gvt_redis_sock), "%s/redis.sock", gvt_dir);
	snprintf(gvt_worker_sock, sizeof(gvt_worker_sock), "%s/worker.sock", gvt_dir);
	snprintf(gvt_pepper, sizeof(gvt_pepper), "%s/pepper", gvt_dir);
	h_ctl_setup(gvt_redis_sock, gvt_pepper);
	snprintf(gvt_creds, sizeof(gvt_creds), "%s/admin.creds", gvt_dir);
	if (h_write_file(gvt_pepper, H_TEST_PEPPER, 0600) != 0 ||
	    h_write_file(gvt_creds, "tester " ADMIN_TOKEN "\n", 0600) != 0)
		return -1;
	rc = gvt_start_redis();
	if (rc != 0)
		return rc;
	model = h_model("tiny", "Q8_0", "llama");
	if (!model)
		return -1;
	snprintf(worker_cfg, sizeof(worker_cfg),
		 "{\"worker\": {\"name\": \"w0\", \"model\": \"%s\", \"model_name\": \"tiny\","
		 " \"socket\": \"%s\", \"threads\": 1, \"kv_cache_bytes\": \"16MiB\","
		 " \"max_running\": 8, \"stats_interval_ms\": 100}}", model, gvt_worker_sock);
	if (h_worker_start(&gvt_worker, "worker", worker_cfg) != 0)
		return -1;
	for (int i = 0; i < N_GW; i++)
		if (gvt_start_gateway(i) != 0)
			return -1;
	h_ctl(NULL, 0, "tenant create gov");
	h_ctl(NULL, 0, "client create gov/app");
	h_ctl(NULL, 0, "tenant create rev");
	h_ctl(NULL, 0, "client create rev/app");
	h_issue_key("gov/app", gvt_key_u, NULL);
	return 0;
}

int gvt_teardown(void **state)
{
	int rc = 0;

	(void)state;
	for (int i = 0; i < N_GW; i++)
		if (h_stop(&gvt_gw[i], 10000) != 0) {
			fprintf(stderr, "gateway%d exit status non-zero; log kept: %s\n", i,
				gvt_gw[i].log);
			rc = -1;
		}
	h_stop(&gvt_worker, 10000);
	h_stop(&gvt_redis, 10000);
	if (rc == 0)
		h_cleanup();
	return rc;
}

/* ---- the admin API is mounted -------------------------------------------- */

