/* SPDX-License-Identifier: MIT */
#include "cli.h"
int tb_cmd_tiers(int argc, char **argv)
{
    (void)argc; (void)argv;
    tb_log_error("tiers: not built yet");
    return TB_EXIT_FAIL;
}
