/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* FI_IBFAB_* parameters: defaults, values, out-of-range values. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "ibf.h"
#include "ibf_rdm_bind.h"

static void clear_env(void)
{
	unsetenv("FI_IBFAB_TX_SIZE");
	unsetenv("FI_IBFAB_INLINE_SIZE");
	unsetenv("FI_IBFAB_IFACE");
	unsetenv("FI_IBFAB_LINK_LOCAL");
	unsetenv("FI_IBFAB_CM_TIMEOUT");
	unsetenv("FI_IBFAB_CQ_SIZE");
	unsetenv("FI_IBFAB_MIN_RNR_TIMER");
	unsetenv("FI_IBFAB_ACK_TIMEOUT");
	unsetenv("FI_IBFAB_RETRY_COUNT");
	unsetenv("FI_IBFAB_DEVICE");
	unsetenv("FI_IBFAB_RDM_RNDV_WINDOWS");
}

static void setup(void)
{
	static int defined;

	clear_env();
	if (!defined++)
		ibf_params_define();
}

TestSuite(params, .init = setup, .fini = clear_env);

Test(params, defaults)
{
	ibf_params_load();
	cr_assert_eq(ibf_params.tx_size, 384);
	cr_assert_eq(ibf_params.rx_size, 384);
	cr_assert_eq(ibf_params.inline_size, 0);
	cr_assert_null(ibf_params.iface);
	cr_assert_eq(ibf_params.link_local, 0);
	cr_assert_eq(ibf_params.cm_timeout_ms, 2000);
	cr_assert_eq(ibf_params.min_rnr_timer, 8);
	cr_assert_eq(ibf_params.ack_timeout, 0);	/* rdma_cm's */
	cr_assert_eq(ibf_params.retry_count, 6);
}

Test(params, values_from_environment)
{
	setenv("FI_IBFAB_TX_SIZE", "1024", 1);
	setenv("FI_IBFAB_INLINE_SIZE", "64", 1);
	setenv("FI_IBFAB_IFACE", "ib", 1);
	setenv("FI_IBFAB_LINK_LOCAL", "yes", 1);
	setenv("FI_IBFAB_CM_TIMEOUT", "500", 1);
	setenv("FI_IBFAB_MIN_RNR_TIMER", "1", 1);
	setenv("FI_IBFAB_ACK_TIMEOUT", "14", 1);
	setenv("FI_IBFAB_RETRY_COUNT", "0", 1);
	ibf_params_load();
	cr_assert_eq(ibf_params.min_rnr_timer, 1);
	cr_assert_eq(ibf_params.ack_timeout, 14);
	cr_assert_eq(ibf_params.retry_count, 0);
	cr_assert_eq(ibf_params.tx_size, 1024);
	cr_assert_eq(ibf_params.inline_size, 64);
	cr_assert_str_eq(ibf_params.iface, "ib");
	cr_assert_eq(ibf_params.link_local, 1);
	cr_assert_eq(ibf_params.cm_timeout_ms, 500);
}

Test(params, out_of_range_keeps_default)
{
	setenv("FI_IBFAB_TX_SIZE", "0", 1);
	setenv("FI_IBFAB_CQ_SIZE", "99999999999", 1);
	setenv("FI_IBFAB_CM_TIMEOUT", "-5", 1);
	setenv("FI_IBFAB_MIN_RNR_TIMER", "32", 1);
	setenv("FI_IBFAB_ACK_TIMEOUT", "32", 1);
	setenv("FI_IBFAB_RETRY_COUNT", "7", 1);	/* for ever on rxe */
	ibf_params_load();
	cr_assert_eq(ibf_params.min_rnr_timer, 8);
	cr_assert_eq(ibf_params.ack_timeout, 0);
	cr_assert_eq(ibf_params.retry_count, 6);
	cr_assert_eq(ibf_params.tx_size, 384);
	cr_assert_eq(ibf_params.cq_size, 1024);
	cr_assert_eq(ibf_params.cm_timeout_ms, 2000);
}

/* FI_IBFAB_DEVICE names devices exactly, commas between. */
Test(params, device_by_name)
{
	ibf_params_load();
	cr_assert(ibf_device_wanted("mlx5_0"));	/* unset: every device */
	setenv("FI_IBFAB_DEVICE", "rxe1,mlx5_0", 1);
	ibf_params_load();
	cr_assert(ibf_device_wanted("rxe1"));
	cr_assert(ibf_device_wanted("mlx5_0"));
	cr_assert_not(ibf_device_wanted("rxe0"));
	cr_assert_not(ibf_device_wanted("mlx5"));	/* a prefix is not a name */
	cr_assert_not(ibf_device_wanted("mlx5_01"));
}

/* A device with type 1 windows: an HCA (Mellanox's vendor id) or rxe. */
static struct ibv_device_attr windowed(uint32_t vendor_id)
{
	struct ibv_device_attr da = {
		.vendor_id = vendor_id,
		.max_mw = 1 << 16,
		.device_cap_flags = IBV_DEVICE_MEM_WINDOW,
	};

	return da;
}

/*
 * FI_IBFAB_RDM_RNDV_WINDOWS unset: rendezvous sends go through windows
 * on an HCA and register on Soft-RoCE (whose repeated reads can cross
 * the FIN that closed their window); set, it decides wherever the
 * device has windows; without windows nothing turns them on.
 */
Test(params, rndv_windows_by_device)
{
	struct ibv_device_attr hca = windowed(0x02c9), rxe = windowed(0xffffff);
	struct ibv_device_attr bare = windowed(0x02c9);

	bare.max_mw = 0;
	ibf_params_load();
	cr_assert_eq(ibf_params.rdm_rndv_windows, -1);
	cr_assert(ibf_rdm_windows_wanted(ibf_params.rdm_rndv_windows, &hca));
	cr_assert_not(ibf_rdm_windows_wanted(ibf_params.rdm_rndv_windows, &rxe));
	cr_assert_not(ibf_rdm_windows_wanted(ibf_params.rdm_rndv_windows, &bare));
	bare = windowed(0x02c9);
	bare.device_cap_flags = 0;
	cr_assert_not(ibf_rdm_windows_wanted(-1, &bare));

	setenv("FI_IBFAB_RDM_RNDV_WINDOWS", "1", 1);
	ibf_params_load();
	cr_assert_eq(ibf_params.rdm_rndv_windows, 1);
	cr_assert(ibf_rdm_windows_wanted(ibf_params.rdm_rndv_windows, &rxe));
	cr_assert(ibf_rdm_windows_wanted(ibf_params.rdm_rndv_windows, &hca));
	cr_assert_not(ibf_rdm_windows_wanted(ibf_params.rdm_rndv_windows, &bare));

	setenv("FI_IBFAB_RDM_RNDV_WINDOWS", "0", 1);
	ibf_params_load();
	cr_assert_eq(ibf_params.rdm_rndv_windows, 0);
	cr_assert_not(ibf_rdm_windows_wanted(ibf_params.rdm_rndv_windows, &hca));
	cr_assert_not(ibf_rdm_windows_wanted(ibf_params.rdm_rndv_windows, &rxe));
}
