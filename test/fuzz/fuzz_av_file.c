/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * libFuzzer: a named AV's shared memory as another process (or user) may
 * have left it in /dev/shm, opened with FI_READ and looked up.  ibf_av_open
 * must refuse what does not hold together and never read past the file.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/fi_domain.h>

#include "ibf_rdm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ibf_domain dom;
	static struct fi_info *info;
	static char name[64], path[96];
	struct fi_av_attr attr = { .type = FI_AV_TABLE, .flags = FI_READ };
	struct sockaddr_in6 out;
	struct ibf_name probe;
	struct fid_av *av;
	size_t len, i;
	int fd;

	if (!info) {
		info = fi_allocinfo();
		info->addr_format = FI_SOCKADDR_IN;
		dom.info = info;
		snprintf(name, sizeof(name), "fuzz-%d", (int)getpid());
		snprintf(path, sizeof(path), "/ibfab-av-%s", name);
	}
	if (size > (1 << 16))
		return 0;
	shm_unlink(path);
	fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size) {
		close(fd);
		shm_unlink(path);
		return 0;
	}
	close(fd);
	attr.name = name;
	if (!ibf_av_open(&dom.domain_fid, &attr, &av, NULL)) {
		for (i = 0; i < 70; i++) {
			len = sizeof(out);
			(void)fi_av_lookup(av, i * (i + 1) * 37, &out, &len);
		}
		memset(&probe, 0, sizeof(probe));
		if (size >= sizeof(probe))
			memcpy(&probe, data + size - sizeof(probe), sizeof(probe));
		(void)ibf_av_find((struct ibf_av *)av, &probe);
		fi_close(&av->fid);
	}
	shm_unlink(path);
	return 0;
}
