/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The verdict of one check in the MPI programs (ibft_mpi, ibft_mpi_sem,
 * ibft_mpi_osc): every rank's, combined, so that a check passes only if
 * it passed on all; rank 0 prints "ok - GROUP-NAME [N ranks]" or "not ok
 * - ...".  Define IBFT_MPI_GROUP ("mpi", "mpi-sem", ...) before including.
 * Each program is one file, so the definitions live here.
 */
#ifndef IBFT_MPI_CHECK_H
#define IBFT_MPI_CHECK_H

#include <mpi.h>
#include <stdio.h>

static int rank, size, failed, passed;

static void check(int ok, const char *name)
{
	int all;

	MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("%s - " IBFT_MPI_GROUP "-%s [%d ranks]\n",
		       all ? "ok" : "not ok", name, size);
		fflush(stdout);
	}
	if (all)
		passed++;
	else
		failed++;
}

#endif /* IBFT_MPI_CHECK_H */
