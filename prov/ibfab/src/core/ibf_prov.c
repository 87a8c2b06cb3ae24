/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* The provider's entry point: what libfabric's core loads and calls. */
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

/* The DSO's only exported symbol (FI_EXT_INI sets its visibility). */
FI_EXT_INI
{
	ibf_params_define();
	ibf_params_load();
	return &ibf_prov;
}
