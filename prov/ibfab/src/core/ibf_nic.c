/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * fi_info->nic: the device, bus and link behind an fi_info, as libfabric's
 * verbs provider reports them, so that a consumer picking the NIC nearest
 * a process (Open MPI 5 reads nic->bus_attr) sees ibfab's the same way.
 *
 * The facts are gathered with the device's limits (ibf_info.c: struct
 * ibf_nic_facts, no allocation); here they become a struct fid_nic that
 * libfabric's fi_dupinfo copies (FI_DUP) and fi_freeinfo closes.
 */
#include "config.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibf.h"

struct ibf_nic {
	struct fid_nic nic;
	struct fi_device_attr device;
	struct fi_bus_attr bus;
	struct fi_link_attr link;
};

static void ibf_nic_free(struct ibf_nic *n)
{
	free(n->device.name);
	free(n->device.device_id);
	free(n->device.device_version);
	free(n->device.vendor_id);
	free(n->device.driver);
	free(n->device.firmware);
	free(n->link.address);
	free(n->link.network_type);
	free(n);
}

static int ibf_nic_close(struct fid *fid)
{
	ibf_nic_free(container_of(fid, struct ibf_nic, nic.fid));
	return 0;
}

static struct ibf_nic *ibf_nic_alloc(void);

/* A string copied, NULL staying NULL; *bad set if memory ran out. */
static char *ibf_nic_strdup(const char *s, int *bad)
{
	char *d = s ? strdup(s) : NULL;

	if (s && !d)
		*bad = 1;
	return d;
}

/* FI_DUP: a deep copy for fi_dupinfo. */
static int ibf_nic_control(struct fid *fid, int command, void *arg)
{
	struct ibf_nic *n = container_of(fid, struct ibf_nic, nic.fid), *d;
	int bad = 0;

	if (command != FI_DUP || !arg)
		return -FI_ENOSYS;
	d = ibf_nic_alloc();
	if (!d)
		return -FI_ENOMEM;
	d->device.name = ibf_nic_strdup(n->device.name, &bad);
	d->device.device_id = ibf_nic_strdup(n->device.device_id, &bad);
	d->device.device_version = ibf_nic_strdup(n->device.device_version, &bad);
	d->device.vendor_id = ibf_nic_strdup(n->device.vendor_id, &bad);
	d->device.driver = ibf_nic_strdup(n->device.driver, &bad);
	d->device.firmware = ibf_nic_strdup(n->device.firmware, &bad);
	d->bus = n->bus;
	d->link = n->link;
	d->link.address = ibf_nic_strdup(n->link.address, &bad);
	d->link.network_type = ibf_nic_strdup(n->link.network_type, &bad);
	if (bad) {
		ibf_nic_free(d);
		return -FI_ENOMEM;
	}
	*(struct fid_nic **)arg = &d->nic;
	return 0;
}

static struct fi_ops ibf_nic_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_nic_close,
	.bind = ibf_no_bind,
	.control = ibf_nic_control,
	.ops_open = (void *)ibf_no_control,
};

static struct ibf_nic *ibf_nic_alloc(void)
{
	struct ibf_nic *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->nic.fid.fclass = FI_CLASS_NIC;
	n->nic.fid.ops = &ibf_nic_fi_ops;
	n->nic.device_attr = &n->device;
	n->nic.bus_attr = &n->bus;
	n->nic.link_attr = &n->link;
	return n;
}

size_t ibf_nic_speed(uint8_t active_speed, uint8_t active_width)
{
	/* Bits per second a lane carries at each IB speed code, the rates
	 * libfabric's verbs provider reports (QDR and FDR10 as 8 Gb/s). */
	static const struct { uint8_t code; double gbps; } speeds[] = {
		{ 1, 2.5 }, { 2, 5 }, { 4, 8 }, { 8, 8 }, { 16, 14 }, { 32, 25 },
		{ 64, 50 }, { 128, 100 },
	};
	/* Lanes at each width code (1X, 4X, 8X, 12X, 2X). */
	static const struct { uint8_t code; unsigned lanes; } widths[] = {
		{ 1, 1 }, { 2, 4 }, { 4, 8 }, { 8, 12 }, { 16, 2 },
	};
	double gbps = 0;
	unsigned lanes = 0;
	size_t i;

	for (i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
		if (speeds[i].code == active_speed)
			gbps = speeds[i].gbps;
	for (i = 0; i < sizeof(widths) / sizeof(widths[0]); i++)
		if (widths[i].code == active_width)
			lanes = widths[i].lanes;
	return (size_t)(gbps * 1e9) * lanes;
}

int ibf_nic_pci_parse(const char *path, struct fi_pci_attr *pci)
{
	const char *last = strrchr(path, '/');
	unsigned dom, bus, dev, fn;
	char tail;

	last = last ? last + 1 : path;
	if (sscanf(last, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4 ||
	    dom > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
		return -FI_EINVAL;
	pci->domain_id = (uint16_t)dom;
	pci->bus_id = (uint8_t)bus;
	pci->device_id = (uint8_t)dev;
	pci->function_id = (uint8_t)fn;
	return 0;
}

void ibf_nic_sysfs(const char *dev_name, struct ibf_nic_facts *f)
{
	char path[PATH_MAX], real[PATH_MAX], link[PATH_MAX];
	ssize_t n;

	/* A PCI function's device directory is named by its address; a
	 * software device (rxe, siw) has none: no bus, as verbs says. */
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", dev_name);
	f->has_pci = realpath(path, real) && !ibf_nic_pci_parse(real, &f->pci);
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/driver",
		 dev_name);
	n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		const char *base;

		link[n] = '\0';
		base = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
		if (strlen(base) < sizeof(f->driver))
			memcpy(f->driver, base, strlen(base) + 1);
	}
}

/* The link's address: the IP the fi_info is for, without a port. */
static const char *ibf_nic_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	const void *a = !sa ? NULL : sa->sa_family == AF_INET ?
		(const void *)&((const struct sockaddr_in *)sa)->sin_addr :
		sa->sa_family == AF_INET6 ?
		(const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr : NULL;

	return a && inet_ntop(sa->sa_family, a, buf, (socklen_t)len) ? buf : NULL;
}

struct fid_nic *ibf_nic_new(const struct ibf_nic_facts *f, const char *dev_name,
			    const struct sockaddr *addr)
{
	struct ibf_nic *n = ibf_nic_alloc();
	char buf[64];
	int bad = 0;

	if (!n)
		return NULL;
	n->device.name = ibf_nic_strdup(dev_name, &bad);
	snprintf(buf, sizeof(buf), "0x%04x", f->vendor_part_id);
	n->device.device_id = ibf_nic_strdup(buf, &bad);
	snprintf(buf, sizeof(buf), "%u", f->hw_ver);
	n->device.device_version = ibf_nic_strdup(buf, &bad);
	snprintf(buf, sizeof(buf), "0x%04x", f->vendor_id);
	n->device.vendor_id = ibf_nic_strdup(buf, &bad);
	n->device.driver = f->driver[0] ? ibf_nic_strdup(f->driver, &bad) : NULL;
	n->device.firmware = ibf_nic_strdup(f->fw_ver, &bad);
	n->bus.bus_type = f->has_pci ? FI_BUS_PCI : FI_BUS_UNKNOWN;
	if (f->has_pci)
		n->bus.attr.pci = f->pci;
	n->link.address = ibf_nic_strdup(ibf_nic_addr(addr, buf, sizeof(buf)), &bad);
	n->link.mtu = f->active_mtu >= IBV_MTU_256 && f->active_mtu <= IBV_MTU_4096 ?
		      (size_t)128 << f->active_mtu : 0;
	n->link.speed = ibf_nic_speed(f->active_speed, f->active_width);
	n->link.state = f->port_state == IBV_PORT_ACTIVE ? FI_LINK_UP :
			f->port_state == IBV_PORT_NOP ? FI_LINK_UNKNOWN : FI_LINK_DOWN;
	n->link.network_type = ibf_nic_strdup(f->link_layer == IBV_LINK_LAYER_ETHERNET ?
					      "Ethernet" : "InfiniBand", &bad);
	if (bad) {
		ibf_nic_free(n);
		return NULL;
	}
	return &n->nic;
}
