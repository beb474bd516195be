/*
 * governance_fixture.h - the processes of test_governance.c: a private
 * redis-server on a Unix socket, TWO sluice-gateways sharing it (plain
 * HTTP on loopback), one sluice-worker, sluicectl for keys; gvt_setup /
 * gvt_teardown are the cmocka group fixtures.  Tests only.
 */
#ifndef SLUICE_TESTS_INTEGRATION_GOVERNANCE_FIXTURE_H
#define SLUICE_TESTS_INTEGRATION_GOVERNANCE_FIXTURE_H

#include <stdint.h>

#include "tests/integration/harness.h"

#define DEADLINE_MS 60000
#define N_GW 2
#define N_REVOKE 100
#define ADMIN_TOKEN "test-admin-token-0123456789abcdef0123456789"

extern struct h_proc gvt_redis, gvt_worker, gvt_gw[N_GW];
extern char gvt_dir[512], gvt_redis_sock[600], gvt_worker_sock[600], gvt_pepper[600], gvt_creds[600];
extern int gvt_port[N_GW], gvt_admin_port[N_GW];
extern char gvt_key_u[64];

int64_t gvt_now_us(void);
int gvt_http(int p, const char *method, const char *path, const char *auth,
		const char *data, char **body);
int gvt_start_redis(void);
int gvt_start_gateway(int i);
int gvt_setup(void **state);
int gvt_teardown(void **state);

#endif
