/* SPDX-License-Identifier: MIT */
#include "cli.h"
int tb_cmd_export(int argc, char **argv)
{
    (void)argc; (void)argv;
    tb_log_error("export: not built yet");
    return TB_EXIT_FAIL;
}
