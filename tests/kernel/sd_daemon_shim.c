// SPDX-License-Identifier: GPL-2.0
/*
 * The three sd-daemon calls stackmapd makes, for -DSTACKMAPD_STATIC=ON
 * builds (and sd_journal_send() for spdlog's systemd sink, below): Debian
 * ships no static libsystemd. Same protocol: a datagram of
 * "KEY=VALUE" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a
 * leading '@' names an abstract socket); without it, nothing to do.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int sd_notify(int unset_environment, const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;
	int fd, ret;

	if (!path || !*path)
		return 0;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -EINVAL;
	strcpy(sa.sun_path, path);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	len = offsetof(struct sockaddr_un, sun_path) + strlen(path);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	ret = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0 ?
		      -errno :
		      1;
	close(fd);
	if (unset_environment)
		unsetenv("NOTIFY_SOCKET");
	return ret;
}

int sd_notifyf(int unset_environment, const char *format, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, format);
	vsnprintf(buf, sizeof(buf), format, ap);
	va_end(ap);
	return sd_notify(unset_environment, buf);
}

int sd_watchdog_enabled(int unset_environment, uint64_t *usec)
{
	const char *s = getenv("WATCHDOG_USEC");
	const char *p = getenv("WATCHDOG_PID");
	unsigned long long v;
	int ret = 0;

	if (s && (v = strtoull(s, NULL, 10)) > 0 &&
	    (!p || (pid_t)strtol(p, NULL, 10) == getpid())) {
		if (usec)
			*usec = v;
		ret = 1;
	}
	if (unset_environment) {
		unsetenv("WATCHDOG_USEC");
		unsetenv("WATCHDOG_PID");
	}
	return ret;
}

/*
 * spdlog's systemd sink, which cmd/main.cpp uses only when $JOURNAL_STREAM
 * says stderr already is a journal stream: the first field is always
 * "MESSAGE=%.*s", so write that line to stderr. The other fields (priority,
 * identifier, code location) are dropped: their arguments cannot be walked
 * past portably without parsing each format.
 */
int sd_journal_send(const char *format, ...)
{
	char buf[4096];
	va_list ap;

	va_start(ap, format);
	vsnprintf(buf, sizeof(buf), format, ap);
	va_end(ap);
	if (!strncmp(buf, "MESSAGE=", 8))
		fprintf(stderr, "%s\n", buf + 8);
	return 0;
}
