/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* fi_info->nic: the device, bus and link, copied and freed by libfabric. */
#include <arpa/inet.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ibf.h"

Test(nic, pci_address_from_sysfs_path)
{
	struct fi_pci_attr pci = { 0 };

	cr_assert_eq(ibf_nic_pci_parse("/sys/devices/pci0000:00/0000:00:02.0/"
				       "0000:3b:00.1", &pci), 0);
	cr_expect_eq(pci.domain_id, 0);
	cr_expect_eq(pci.bus_id, 0x3b);
	cr_expect_eq(pci.device_id, 0);
	cr_expect_eq(pci.function_id, 1);
	cr_expect_eq(ibf_nic_pci_parse("/sys/devices/virtual/net/veth0", &pci),
		     -FI_EINVAL);	/* a software device has none */
	cr_expect_eq(ibf_nic_pci_parse("0000:3b:00.1x", &pci), -FI_EINVAL);
}

Test(nic, speed_from_codes)
{
	cr_expect_eq(ibf_nic_speed(1, 1), 2500000000ull);	/* SDR 1X */
	cr_expect_eq(ibf_nic_speed(32, 2), 100000000000ull);	/* EDR 4X */
	cr_expect_eq(ibf_nic_speed(64, 2), 200000000000ull);	/* HDR 4X */
	cr_expect_eq(ibf_nic_speed(3, 2), 0);			/* no such code */
}

Test(nic, dup_and_free_through_libfabric)
{
	struct ibf_nic_facts f = { .vendor_id = 0x15b3, .vendor_part_id = 0x1017,
				   .hw_ver = 2, .fw_ver = "16.35.1012",
				   .driver = "mlx5_core", .active_mtu = IBV_MTU_4096,
				   .active_speed = 32, .active_width = 2,
				   .link_layer = IBV_LINK_LAYER_ETHERNET,
				   .port_state = IBV_PORT_ACTIVE, .has_pci = 1,
				   .pci = { 0, 0x3b, 0, 1 } };
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7) };
	struct fi_info *info = fi_allocinfo(), *dup;
	struct fid_nic *n;

	cr_assert(info);
	inet_pton(AF_INET, "198.18.0.1", &sin.sin_addr);
	info->nic = ibf_nic_new(&f, "mlx5_0", (struct sockaddr *)&sin);
	cr_assert(info->nic);
	dup = fi_dupinfo(info);
	cr_assert(dup && dup->nic && dup->nic != info->nic);
	n = dup->nic;
	cr_expect_str_eq(n->device_attr->name, "mlx5_0");
	cr_expect_str_eq(n->device_attr->vendor_id, "0x15b3");
	cr_expect_str_eq(n->device_attr->device_id, "0x1017");
	cr_expect_str_eq(n->device_attr->device_version, "2");
	cr_expect_str_eq(n->device_attr->driver, "mlx5_core");
	cr_expect_str_eq(n->device_attr->firmware, "16.35.1012");
	cr_expect_neq(n->device_attr->name, info->nic->device_attr->name);
	cr_expect_eq(n->bus_attr->bus_type, FI_BUS_PCI);
	cr_expect_eq(n->bus_attr->attr.pci.bus_id, 0x3b);
	cr_expect_eq(n->bus_attr->attr.pci.function_id, 1);
	cr_expect_str_eq(n->link_attr->address, "198.18.0.1");
	cr_expect_eq(n->link_attr->mtu, 4096);
	cr_expect_eq(n->link_attr->speed, 100000000000ull);
	cr_expect_eq(n->link_attr->state, FI_LINK_UP);
	cr_expect_str_eq(n->link_attr->network_type, "Ethernet");
	fi_freeinfo(dup);
	fi_freeinfo(info);	/* both nics closed: ASan sees no leak */
}
