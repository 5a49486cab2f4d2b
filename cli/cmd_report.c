/* SPDX-License-Identifier: MIT */
#include "cli.h"
int tb_cmd_report(int argc, char **argv)
{
    (void)argc; (void)argv;
    tb_log_error("report: not built yet");
    return TB_EXIT_FAIL;
}
