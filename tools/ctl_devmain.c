/*
 * ctl_devmain.c - stand-alone main() for the governance commands, used by
 * the integration tests until sluicectl's own main() dispatches to
 * ctl_main() (then this file and its target can go).
 */
#include <string.h>

#include "tools/ctl_main.h"

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		puts("sluicectl " SLUICE_VERSION);
		return 0;
	}
	return ctl_main(argc, argv);
}
