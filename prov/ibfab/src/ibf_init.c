/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The provider's entry point, what libfabric loads and calls first, and
 * the one file above core and the wings: it hands core the wings' entries
 * (struct ibf_wing_ops), so that core names no wing (prov/ibfab/layers).
 */
#include "config.h"

#include "ibf.h"
#include "ibf_atomic_ops.h"
#include "ibf_msg.h"
#include "ibf_rdm.h"

/* The DSO's only exported symbol (FI_EXT_INI sets its visibility). */
FI_EXT_INI
{
	ibf_wing_ops = (struct ibf_wing_ops){
		.msg_ep_open = ibf_ep_open,
		.rdm_ep_open = ibf_rdm_ep_open,
		.srx_open = ibf_srx_open,
		.pep_open = ibf_pep_open,
		.rdm_atomic = &ibf_rdm_atomic_port,
		.msg_atomic = &ibf_msg_atomic_port,
	};
	ibf_params_define();
	ibf_params_load();
	return &ibf_prov;
}
