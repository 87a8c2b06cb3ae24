/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
#include <dirent.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ibft.h"

struct ibft_opts ibft_opts = {
	.prov = "ibfab", .port = "7471", .iters = 20, .max_size = 4 << 20,
};
int ibft_failed;
static int ibft_passed;

void ibft_parse(int argc, char **argv, const char *usage_extra)
{
	int c;

	/* Each result line out at once: a provider that crashes later must
	 * not take the lines before it with it. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "p:D:s:d:P:n:t:m:wh")) != -1) {
		switch (c) {
		case 'p': ibft_opts.prov = optarg; break;
		case 'D': ibft_opts.domains = optarg; break;
		case 's': ibft_opts.src = optarg; break;
		case 'd': ibft_opts.dst = optarg; break;
		case 'P': ibft_opts.port = optarg; break;
		case 'n': ibft_opts.iters = atoi(optarg); break;
		case 't': ibft_opts.test = optarg; break;
		case 'm': ibft_opts.max_size = strtoul(optarg, NULL, 0); break;
		case 'w': ibft_opts.wait_fd = 1; break;
		default:
			fprintf(stderr, "usage: %s [-p provider] [-D dom1,dom2] "
				"[-s src] [-d dst] [-P port] [-n iters] [-t test] [-m max_size] "
				"[-w] %s\n",
				argv[0], usage_extra ? usage_extra : "");
			exit(c == 'h' ? 0 : 2);
		}
	}
	ibft_opts.server = !ibft_opts.dst;
}

int ibft_check(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		printf("ok - %s [%s]\n", name, ibft_opts.prov);
		ibft_passed++;
	} else {
		printf("not ok - %s [%s]: ", name, ibft_opts.prov);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
		ibft_failed++;
	}
	fflush(stdout);
	return ok;
}

int ibft_expect(long got, long want, const char *name, const char *call)
{
	return ibft_check(got == want, name, "%s returned %ld (%s), want %ld (%s)",
			  call, got, fi_strerror((int)-got), want,
			  fi_strerror((int)-want));
}

int ibft_deviates(const char *prov, const char *name, const char *why)
{
	if (strcmp(ibft_opts.prov, prov))
		return 0;
	printf("skip - %s [%s]: %s\n", name, prov, why);
	return 1;
}

struct fi_info *ibft_msg_hints(void)
{
	struct fi_info *hints = fi_allocinfo();

	if (!hints)
		return NULL;
	hints->fabric_attr->prov_name = strdup(ibft_opts.prov);
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG | FI_RMA;
	hints->mode = FI_CONTEXT | FI_RX_CQ_DATA;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	return hints;
}

int ibft_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;	/* the directory's own fd */
}

long ibft_rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

double ibft_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int ibft_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int ibft_finish(void)
{
	printf("# %s: checks passed %d, failed %d\n", ibft_opts.prov, ibft_passed,
	       ibft_failed);
	return ibft_failed ? 1 : 0;
}
