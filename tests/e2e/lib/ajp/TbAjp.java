// SPDX-License-Identifier: MIT
// TbAjp.java — the servlet behind e2e_ajp.sh: answers by path, for any method,
// so that every request Apache forwards over AJP reaches Tomcat's access log.
package tbajp;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InputStream;

public final class TbAjp extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void service(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        String path = req.getPathInfo() == null ? "/" : req.getPathInfo();
        // Read the whole body: Tomcat asks the web server for it chunk by chunk.
        long body = 0;
        byte[] buf = new byte[8192];
        try (InputStream in = req.getInputStream()) {
            for (int n; (n = in.read(buf)) > 0;)
                body += n;
        }
        resp.setContentType("text/plain");
        if (path.startsWith("/missing")) {
            resp.setStatus(404);
            resp.getWriter().print("no such thing\n");
        } else if (path.startsWith("/slow")) {
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            resp.getWriter().print("slept\n");
        } else if (path.startsWith("/big")) {
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < 20000; i++)
                sb.append("tbneck ajp13 ");
            resp.getWriter().print(sb);
        } else {
            resp.getWriter().print(req.getMethod() + " " + path + " " + body + "\n");
        }
    }
}
