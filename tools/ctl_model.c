/*
 * ctl_model.c - `sluicectl model list|promote|rollback` and `sluicectl eval
 * record|run`: the model change procedure of docs/operations.md over the
 * gateway's admin API (tools/ctl_admin.c).
 *
 * Eval sets and baselines are the operator's files: the set is read here
 * and sent in the request body; a recording is written to --out (mode
 * 0600).  Neither is logged anywhere.  An eval run prints a table per case
 * (exact match, first divergence with the text around it on both sides,
 * checks, log-probability change, latency) and the gates' verdict; exit 8
 * when the run missed its gates.  Thread: main thread only.
 */
#include "tools/ctl_model.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/ctl_admin.h"
#include "tools/ctl_internal.h"

#define CTL_MODEL_RESPONSE_MAX (256u << 20)
#define CTL_MODEL_SET_MAX (64u << 20)
#define CTL_EVAL_TIMEOUT_S 3600

void ctl_model_usage(FILE *out)
{
	fputs("  model list [--json]   the models, their workers, roles, digests, engines, last evals\n"
	      "  model promote NAME --worker W [--canary PCT]\n"
	      "                     W takes NAME's traffic (PCT%% of tenants as a canary);\n"
	      "                     refused unless W's last eval passed its gates\n"
	      "  model rollback NAME  end NAME's canary, else return it to its previous workers\n"
	      "  eval record --model NAME --set FILE --out FILE [--worker W]\n"
	      "                     run the set on a serving worker of NAME, keep its outputs\n"
	      "  eval run --worker W --set FILE --baseline FILE [--gate exact=F]\n"
	      "           [--gate checks=F] [--gate logprob=NATS] [--json] [--out FILE]\n"
	      "                     replay the set on W against the baseline; exit 8 when\n"
	      "                     it misses its gates\n"
	      "                     (model and eval take --admin and --admin-token-file)\n",
	      out);
}

int ctl_model_handles(int argc, char **argv)
{
	return ctl_admin_command_is(argc, argv, "model", "eval");
}

/* ---- options ------------------------------------------------------------ */

struct md_opts {
	const char *pos[3];
	int npos;
	const char *worker, *model, *set, *baseline, *out;
	long canary;
	int json;
	char gates[256];     /* a JSON object's members */
};

static int gate_opt(struct md_opts *o, const char *v)
{
	static const char *const names[][2] = {
		{ "exact", "min_exact_match" },
		{ "checks", "min_check_pass" },
		{ "logprob", "max_logprob_drop" },
	};
	const char *eq = strchr(v, '=');
	char *end;
	double x;

	if (!eq)
		return -1;
	x = strtod(eq + 1, &end);
	if (end == eq + 1 || *end)
		return -1;
	for (size_t i = 0; i < 3; i++)
		if (strlen(names[i][0]) == (size_t)(eq - v) && strncmp(v, names[i][0], (size_t)(eq - v)) == 0) {
			size_t n = strlen(o->gates);

			snprintf(o->gates + n, sizeof(o->gates) - n, "%s\"%s\": %.17g", n ? ", " : "",
				 names[i][1], x);
			return 0;
		}
	return -1;
}

static int parse_opts(int argc, char **argv, struct md_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->canary = 100;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char **dst = NULL;

		if (strcmp(a, "--json") == 0) {
			o->json = 1;
			continue;
		}
		if (!strcmp(a, "--worker"))
			dst = &o->worker;
		else if (!strcmp(a, "--model"))
			dst = &o->model;
		else if (!strcmp(a, "--set"))
			dst = &o->set;
		else if (!strcmp(a, "--baseline"))
			dst = &o->baseline;
		else if (!strcmp(a, "--out"))
			dst = &o->out;
		if ((dst || !strcmp(a, "--canary") || !strcmp(a, "--gate")) && i + 1 >= argc) {
			fprintf(stderr, "sluicectl: %s expects a value\n", a);
			return CTL_EXIT_USAGE;
		}
		if (dst) {
			*dst = argv[++i];
		} else if (!strcmp(a, "--canary")) {
			char *end;

			o->canary = strtol(argv[++i], &end, 10);
			if (*end || o->canary < 1 || o->canary > 100) {
				fprintf(stderr, "sluicectl: --canary: expected a percentage from 1 to 100, "
					"found \"%s\"\n", argv[i]);
				return CTL_EXIT_INVALID;
			}
		} else if (!strcmp(a, "--gate")) {
			if (gate_opt(o, argv[++i]) != 0) {
				fprintf(stderr, "sluicectl: --gate: expected exact=F, checks=F or "
					"logprob=NATS, found \"%s\"\n", argv[i]);
				return CTL_EXIT_INVALID;
			}
		} else if (strncmp(a, "--", 2) == 0 || o->npos == 3) {
			fprintf(stderr, "sluicectl: unexpected argument \"%s\"\n", a);
			return CTL_EXIT_USAGE;
		} else {
			o->pos[o->npos++] = a;
		}
	}
	return CTL_EXIT_OK;
}

/* ---- files ---------------------------------------------------------------- */

static json_t *load_json(const char *path, const char *what)
{
	json_error_t je;
	struct stat st;
	json_t *j;

	if (stat(path, &st) == 0 && st.st_size > (off_t)CTL_MODEL_SET_MAX) {
		fprintf(stderr, "sluicectl: %s %s: expected at most %u MiB, found %lld bytes\n", what,
			path, CTL_MODEL_SET_MAX >> 20, (long long)st.st_size);
		return NULL;
	}
	j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!j || !json_is_object(j)) {
		fprintf(stderr, "sluicectl: %s %s: expected a JSON object, found %s (line %d)\n", what,
			path, j ? "another value" : je.text, je.line);
		json_decref(j);
		return NULL;
	}
	return j;
}

static int write_private(const char *path, const json_t *j)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	char *s = json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	size_t n = s ? strlen(s) : 0;
	int rc = -1;

	if (fd >= 0 && s && write(fd, s, n) == (ssize_t)n && write(fd, "\n", 1) == 1)
		rc = 0;
	if (fd >= 0 && close(fd) != 0)
		rc = -1;
	free(s);
	if (rc != 0)
		fprintf(stderr, "sluicectl: --out %s: cannot write it\n", path);
	return rc;
}

/* ---- model list ------------------------------------------------------------ */

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s && *s ? s : "-";
}

static void print_worker(const char *model, const json_t *w)
{
	const json_t *ev = json_object_get(w, "last_eval");
	char role[24], eval[96];

	snprintf(role, sizeof(role), "%s", str(w, "role"));
	if (json_object_get(w, "canary_pct"))
		snprintf(role, sizeof(role), "canary %d%%",
			 (int)json_integer_value(json_object_get(w, "canary_pct")));
	if (json_is_object(ev))
		snprintf(eval, sizeof(eval), "%s%s%.40s", json_is_true(json_object_get(ev, "passed"))
			 ? "passed" : "failed", json_is_true(json_object_get(ev, "passed")) ? "" : ": ",
			 json_is_true(json_object_get(ev, "passed")) ? "" : str(ev, "reason"));
	else
		snprintf(eval, sizeof(eval), "-");
	printf("%-20s %-10s %-11s %-12s %-12.12s %-22.22s %-5s %s\n", model, str(w, "name"), role,
	       str(w, "state"), str(w, "model_sha256"), str(w, "engine_version"),
	       str(w, "backend"), eval);
}

static int model_list(const struct ctl_admin *adm, const struct md_opts *o)
{
	json_t *resp = NULL, *m, *w;
	const char *name;
	int status, rc;
	size_t i;

	if (ctl_admin_call(adm, "GET", "/admin/models", NULL, CTL_MODEL_RESPONSE_MAX, &status,
			   &resp) != 0)
		return CTL_EXIT_UNAVAILABLE;
	rc = ctl_admin_exit_code(status);
	if (rc != 0) {
		ctl_admin_print_error("model list", status, resp);
	} else if (o->json) {
		json_dumpf(resp, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
	} else {
		printf("%-20s %-10s %-11s %-12s %-12s %-22s %-5s %s\n", "MODEL", "WORKER", "ROLE",
		       "STATE", "SHA256", "ENGINE", "BACK", "LAST EVAL");
		json_object_foreach(json_object_get(resp, "models"), name, m) {
			json_array_foreach(json_object_get(m, "workers"), i, w)
				print_worker(*name ? name : "(none)", w);
			if (json_is_true(json_object_get(m, "digest_mismatch")))
				printf("%-20s DIGEST MISMATCH: the workers serving it differ in file or "
				       "engine\n", name);
		}
	}
	json_decref(resp);
	return rc;
}

/* ---- promote, rollback ---------------------------------------------------- */

static int model_change(const struct ctl_admin *adm, const struct md_opts *o, int promote)
{
	char path[256], body[256];
	json_t *resp = NULL;
	int status, rc;

	if (o->npos != 3 || (promote && !o->worker)) {
		fprintf(stderr, "sluicectl: expected \"model %s NAME%s\"\n",
			promote ? "promote" : "rollback", promote ? " --worker W [--canary PCT]" : "");
		return CTL_EXIT_USAGE;
	}
	if (strlen(o->pos[2]) > 128 || strchr(o->pos[2], '/') || strchr(o->pos[2], '?') ||
	    (o->worker && (strlen(o->worker) > 64 || strchr(o->worker, '"') ||
			   strchr(o->worker, '\\')))) {
		fprintf(stderr, "sluicectl: model or worker name: expected [A-Za-z0-9_.:-]\n");
		return CTL_EXIT_INVALID;
	}
	snprintf(path, sizeof(path), "/admin/models/%s/%s", o->pos[2],
		 promote ? "promote" : "rollback");
	snprintf(body, sizeof(body), "{\"worker\": \"%s\", \"canary\": %ld}",
		 o->worker ? o->worker : "", o->canary);
	if (ctl_admin_call(adm, "POST", path, promote ? body : NULL, CTL_MODEL_RESPONSE_MAX,
			   &status, &resp) != 0)
		return CTL_EXIT_UNAVAILABLE;
	rc = ctl_admin_exit_code(status);
	if (rc != 0)
		ctl_admin_print_error(promote ? "model promote" : "model rollback", status, resp);
	else if (promote && o->canary < 100)
		printf("model %s: worker %s takes %ld%% of tenants (canary)\n", o->pos[2], o->worker,
		       o->canary);
	else if (promote)
		printf("model %s: worker %s serves it; the former serving workers are previous "
		       "(rollback target)\n", o->pos[2], o->worker);
	else
		printf("model %s: rolled back (%s)\n", o->pos[2], str(resp, "rolled_back"));
	json_decref(resp);
	return rc;
}

/* ---- eval ------------------------------------------------------------------- */

/* A serving, ready worker of `model` from the inventory (copied), or -1. */
static int pick_worker(const struct ctl_admin *adm, const char *model, char out[80])
{
	json_t *resp = NULL, *w;
	int status;
	size_t i;

	if (ctl_admin_call(adm, "GET", "/admin/models", NULL, CTL_MODEL_RESPONSE_MAX, &status,
			   &resp) != 0 || status != 200) {
		if (resp || status)
			ctl_admin_print_error("model list", status, resp);
		json_decref(resp);
		return -1;
	}
	json_array_foreach(json_object_get(json_object_get(json_object_get(resp, "models"), model),
					   "workers"), i, w) {
		if (!strcmp(str(w, "role"), "serving") && !strcmp(str(w, "state"), "ready")) {
			snprintf(out, 80, "%s", str(w, "name"));
			json_decref(resp);
			return 0;
		}
	}
	fprintf(stderr, "sluicectl: eval record: no ready serving worker of \"%s\"\n", model);
	json_decref(resp);
	return -1;
}

static void print_case(const json_t *c)
{
	const json_t *div = json_object_get(c, "divergence"), *ck;
	const json_t *d = json_object_get(c, "logprob_delta");
	size_t i, nck = json_array_size(json_object_get(c, "checks")), ok = 0;
	char where[24] = "-", checks[24];

	json_array_foreach(json_object_get(c, "checks"), i, ck)
		ok += json_is_true(json_object_get(ck, "passed"));
	snprintf(checks, sizeof(checks), "%zu/%zu", ok, nck);
	if (json_is_object(div))
		snprintf(where, sizeof(where), "token %d",
			 (int)json_integer_value(json_object_get(div, "token")));
	printf("%-24.24s %-5s %-12s %-7s %9s%+8.4f %8.1f\n", str(c, "id"),
	       json_object_get(c, "error") ? "ERROR" : !json_object_get(c, "exact") ? "-"
	       : json_is_true(json_object_get(c, "exact")) ? "yes" : "no", where, checks, "", json_is_number(d) ? json_number_value(d) : 0.0,
	       json_number_value(json_object_get(c, "latency_ms")));
	if (json_object_get(c, "error"))
		printf("    error: %s\n", str(c, "error"));
	if (json_is_object(div)) {
		printf("    baseline: %s\n", str(div, "baseline"));
		printf("    this:     %s\n", str(div, "this"));
	}
	json_array_foreach(json_object_get(c, "checks"), i, ck)
		if (!json_is_true(json_object_get(ck, "passed")))
			printf("    check %s failed%s%s\n", str(ck, "check"),
			       *str(ck, "detail") != '-' ? ": " : "",
			       *str(ck, "detail") != '-' ? str(ck, "detail") : "");
}

static void print_report(const json_t *r)
{
	const json_t *s = json_object_get(r, "summary"), *c;
	const json_t *lat = json_object_get(s, "latency_ms"), *g = json_object_get(s, "gates");
	size_t i;

	printf("eval on worker %s (%s), model %s sha256 %.12s, engine %s, %s on %s\n",
	       str(r, "worker"), str(r, "role"), str(r, "model"), str(r, "model_sha256"),
	       str(r, "engine_version"), str(r, "backend"), str(r, "device"));
	printf("%-24s %-5s %-12s %-7s %17s %8s\n", "CASE", "EXACT", "DIVERGES AT", "CHECKS",
	       "LOGPROB CHANGE", "MS");
	json_array_foreach(json_object_get(r, "cases"), i, c)
		print_case(c);
	printf("cases %d, mean log-probability drop %.4f nats, latency p50 %.1f ms p95 %.1f ms\n",
	       (int)json_integer_value(json_object_get(s, "cases")),
	       json_number_value(json_object_get(s, "logprob_drop")),
	       json_number_value(json_object_get(lat, "p50")),
	       json_number_value(json_object_get(lat, "p95")));
	if (json_is_number(json_object_get(s, "exact_match")))
		printf("exact match rate %.3f\n", json_number_value(json_object_get(s, "exact_match")));
	if (json_is_number(json_object_get(s, "check_pass")))
		printf("check pass rate %.3f\n", json_number_value(json_object_get(s, "check_pass")));
	printf("gates: exact >= %.3f, checks >= %.3f, logprob drop <= %.4f: %s%s%s\n",
	       json_number_value(json_object_get(g, "min_exact_match")),
	       json_number_value(json_object_get(g, "min_check_pass")),
	       json_number_value(json_object_get(g, "max_logprob_drop")),
	       json_is_true(json_object_get(s, "passed")) ? "PASSED"
	       : json_is_null(json_object_get(s, "passed")) ? "not judged (a recording)" : "FAILED",
	       json_is_false(json_object_get(s, "passed")) ? ": " : "",
	       json_is_false(json_object_get(s, "passed")) ? str(s, "reason") : "");
}

static int eval_cmd(struct ctl_admin *adm, const struct md_opts *o, int record)
{
	char worker[80], path[200], *body = NULL;
	json_t *set = NULL, *base = NULL, *req = NULL, *resp = NULL, *gates = NULL;
	int status, rc = CTL_EXIT_USAGE;

	if (o->npos != 2 || !o->set || (record ? !o->model || !o->out : !o->worker || !o->baseline)) {
		fprintf(stderr, "sluicectl: expected \"eval record --model NAME --set FILE --out "
			"FILE\" or \"eval run --worker W --set FILE --baseline FILE\"\n");
		return CTL_EXIT_USAGE;
	}
	rc = CTL_EXIT_INVALID;
	if (!(set = load_json(o->set, "--set")) ||
	    (o->baseline && !(base = load_json(o->baseline, "--baseline"))))
		goto out;
	if (o->gates[0]) {
		char g[300];

		snprintf(g, sizeof(g), "{%s}", o->gates);
		gates = json_loads(g, 0, NULL);
	}
	if (o->worker)
		snprintf(worker, sizeof(worker), "%s", o->worker);
	else if (pick_worker(adm, o->model, worker) != 0) {
		rc = CTL_EXIT_NOTFOUND;
		goto out;
	}
	if (strchr(worker, '/') || strchr(worker, '?') || strlen(worker) > 64)
		goto out;
	req = json_pack("{s:O}", "set", set);
	if (base)
		json_object_set(req, "baseline", base);
	if (gates)
		json_object_set(req, "gates", gates);
	body = json_dumps(req, JSON_COMPACT);
	snprintf(path, sizeof(path), "/admin/workers/%s/eval", worker);
	adm->timeout_s = CTL_EVAL_TIMEOUT_S;
	if (!body || ctl_admin_call(adm, "POST", path, body, CTL_MODEL_RESPONSE_MAX, &status,
				    &resp) != 0) {
		rc = CTL_EXIT_UNAVAILABLE;
		goto out;
	}
	rc = ctl_admin_exit_code(status);
	if (rc != 0) {
		ctl_admin_print_error(record ? "eval record" : "eval run", status, resp);
		goto out;
	}
	if (o->out && write_private(o->out, resp) != 0) {
		rc = CTL_EXIT_UNAVAILABLE;
		goto out;
	}
	if (o->json) {
		json_dumpf(resp, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
	} else {
		print_report(resp);
	}
	if (!record && !json_is_true(json_object_get(json_object_get(resp, "summary"), "passed")))
		rc = CTL_EXIT_GATE;
out:
	free(body);
	json_decref(set);
	json_decref(base);
	json_decref(gates);
	json_decref(req);
	json_decref(resp);
	return rc;
}

int ctl_model_main(int argc, char **argv)
{
	struct ctl_admin adm;
	struct md_opts o;
	int rc;

	argc--;
	argv++;
	rc = ctl_admin_open(&adm, &argc, argv);
	if (rc != 0)
		return rc;
	rc = parse_opts(argc, argv, &o);
	if (rc != 0)
		goto out;
	rc = CTL_EXIT_USAGE;
	if (o.npos >= 2 && !strcmp(o.pos[0], "model") && !strcmp(o.pos[1], "list") && o.npos == 2)
		rc = model_list(&adm, &o);
	else if (o.npos >= 2 && !strcmp(o.pos[0], "model") && !strcmp(o.pos[1], "promote"))
		rc = model_change(&adm, &o, 1);
	else if (o.npos >= 2 && !strcmp(o.pos[0], "model") && !strcmp(o.pos[1], "rollback"))
		rc = model_change(&adm, &o, 0);
	else if (o.npos >= 2 && !strcmp(o.pos[0], "eval") && !strcmp(o.pos[1], "record"))
		rc = eval_cmd(&adm, &o, 1);
	else if (o.npos >= 2 && !strcmp(o.pos[0], "eval") && !strcmp(o.pos[1], "run"))
		rc = eval_cmd(&adm, &o, 0);
	else {
		fprintf(stderr, "sluicectl: expected model list|promote|rollback or eval record|run\n");
		ctl_model_usage(stderr);
	}
out:
	ctl_admin_close(&adm);
	return rc;
}
