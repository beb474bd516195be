/*
 * tokenize_main.c - test driver: `test_worker_tokenize_cli ARGS` runs the
 * tokenize subcommand (worker/serve/cli_tokenize.c) as sluice-worker will.
 */
int wk_cli_tokenize(int argc, char **argv);

int main(int argc, char **argv)
{
	return wk_cli_tokenize(argc, argv);
}
