/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The provider as libfabric sees it (fi_prov_ini, in ibf_init.c, hands it
 * out), and the wings' entries core opens (ibf_wing_ops). */
#include "config.h"

#include "ibf.h"

static void ibf_cleanup(void)
{
	ibf_info_cleanup();
}

struct fi_provider ibf_prov = {
	.version = IBF_PROV_VERSION,
	.fi_version = IBF_FI_VERSION,
	.name = IBF_PROV_NAME,
	.getinfo = ibf_getinfo,
	.fabric = ibf_fabric_open,
	.cleanup = ibf_cleanup,
};

struct ibf_wing_ops ibf_wing_ops;
