/*
 * The pod sandbox's process (the "pause" container): it holds the pod's namespaces open and
 * does nothing else. It reaps any child handed to it (it is PID 1 when the pod shares its PID
 * namespace) and exits 0 on SIGINT or SIGTERM, which is how the runtime stops a sandbox.
 * Built static by hack/images/build.sh; the image holds this one file.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signo) {
	(void)signo;
	_exit(0);
}

static void reap(int signo) {
	(void)signo;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(void) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = stop;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) return 1;
	sa.sa_handler = reap;
	sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	if (sigaction(SIGCHLD, &sa, NULL) < 0) return 1;
	for (;;) pause();
	return 0;
}
