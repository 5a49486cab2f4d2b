/* SPDX-License-Identifier: MIT */
#include "cli.h"
int tb_cmd_serve(int argc, char **argv)
{
    (void)argc; (void)argv;
    tb_log_error("serve: not built yet");
    return TB_EXIT_FAIL;
}
