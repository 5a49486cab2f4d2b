// SPDX-License-Identifier: MIT
// StackServlet.java — the demo application tier: three request classes that
// query MariaDB through a small connection pool, with an allocation pattern
// that makes a small Serial-GC heap stop the world under load.
package tbstack;

import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.PrintWriter;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;

public class StackServlet extends HttpServlet {
    private static final long serialVersionUID = 1L;

    // Counters the test compares with what tbneck saw on the wire.
    private static final AtomicLong REQUESTS = new AtomicLong();
    private static final AtomicLong QUERIES = new AtomicLong();
    private static final AtomicLong ERRORS = new AtomicLong();
    private static final AtomicLong CONNECTIONS = new AtomicLong();
    // Requests inside the servlet now, and the most at once since the last
    // reset: each holds one of the connector's threads from start to end, so
    // the maximum is Tomcat's own count of its busiest moment (what JMX's
    // currentThreadsBusy would show at its peak, without JMX).
    private static final AtomicInteger BUSY = new AtomicInteger();
    private static final AtomicInteger BUSY_MAX = new AtomicInteger();

    // A cache of rendered fragments kept alive across requests. Every request
    // replaces a few random slots, so the old generation keeps filling with
    // dead pointer-rich objects and a full (stop-the-world) collection has to
    // mark and compact a large live graph: that is the transient bottleneck.
    private AtomicReferenceArray<Object> cache;
    private int nodesPerEntry;
    private int entriesPerRequest;
    private int garbagePerRequest;
    private int cpuWork;
    // Every page's first query waits this long in the database (SELECT SLEEP),
    // standing for the disk reads of a database whose data does not fit in
    // memory: Tomcat's requests spend most of their time waiting on MariaDB, as
    // in RUBBoS, so its load is several requests without using the CPU.
    private double dbDelay; // seconds
    // Rounds of MD5 the database computes in each query (BENCHMARK), so that
    // its CPU, not a SLEEP, is what the queries cost: the run script caps that
    // CPU with a cgroup to make the database the bottleneck. 0 = none.
    private int dbCpuLoops;
    // The pool's ceiling, as maxTotal of a JDBC pool: a request that finds all
    // of them lent waits for one, holding its Tomcat thread. 0 = unbounded.
    private Semaphore permits;
    // Connections the pool keeps open even when idle, opened all at once when
    // the first is needed (HikariCP's minimumIdle, 10 by default, equal to its
    // maximumPoolSize; DBCP's initialSize). 0 = open only what is asked for.
    private int minIdle;
    private final AtomicInteger open = new AtomicInteger();
    private static volatile long blackhole;
    // A fixed-size pool of our own rather than the container's: the run script
    // closes every database connection after the warm-up (GET /stats?reset=1)
    // so that the capture sees each connection from its handshake on.
    private final LinkedBlockingDeque<Connection> idle = new LinkedBlockingDeque<>();
    private String url, user, password;

    @Override
    public void init() throws ServletException {
        url = getServletConfig().getInitParameter("jdbcUrl");
        user = getServletConfig().getInitParameter("jdbcUser");
        password = getServletConfig().getInitParameter("jdbcPassword");
        if (url == null)
            throw new ServletException("init-param jdbcUrl is missing");
        cache = new AtomicReferenceArray<>(intParam("cacheEntries", 2000));
        nodesPerEntry = intParam("nodesPerEntry", 200);
        entriesPerRequest = intParam("entriesPerRequest", 2);
        garbagePerRequest = intParam("garbagePerRequest", 2000);
        cpuWork = intParam("cpuWork", 0);
        dbDelay = intParam("dbDelayMicros", 0) / 1e6;
        dbCpuLoops = intParam("dbCpuLoops", 0);
        int poolSize = intParam("poolSize", 0);
        permits = poolSize > 0 ? new Semaphore(poolSize, true) : null;
        minIdle = intParam("poolMinIdle", 0);
    }

    private Connection borrow() throws SQLException {
        if (permits != null)
            permits.acquireUninterruptibly();
        try {
            return open();
        } catch (SQLException | RuntimeException e) {
            if (permits != null)
                permits.release();
            throw e;
        }
    }

    private Connection open() throws SQLException {
        Connection c = idle.pollFirst();
        if (c != null)
            return c;
        if (minIdle == 0)
            return connect();
        // One thread fills the pool, so concurrent first requests open no
        // more than minIdle. The spares go to the far end of the idle list,
        // which is used last in first out, so they stay idle unless needed.
        synchronized (idle) {
            c = idle.pollFirst();
            if (c != null)
                return c;
            while (open.get() < minIdle - 1)
                idle.offerLast(connect());
            return connect();
        }
    }

    private Connection connect() throws SQLException {
        Connection c = DriverManager.getConnection(url, user, password);
        CONNECTIONS.incrementAndGet();
        open.incrementAndGet();
        return c;
    }

    private void giveBack(Connection c) {
        idle.offerFirst(c);
        if (permits != null)
            permits.release();
    }

    /** Gives up a broken connection (closed, not returned): its permit is freed. */
    private void discard(Connection c) throws SQLException {
        try {
            open.decrementAndGet();
            c.close();
        } finally {
            if (permits != null)
                permits.release();
        }
    }

    private void closeIdle() {
        for (Connection c; (c = idle.pollFirst()) != null;) {
            open.decrementAndGet();
            try {
                c.close();
            } catch (SQLException e) {
                ERRORS.incrementAndGet();
            }
        }
    }

    @Override
    public void destroy() {
        closeIdle();
    }

    private int intParam(String name, int dflt) {
        String v = getServletConfig().getInitParameter(name);
        return v == null ? dflt : Integer.parseInt(v.trim());
    }

    /** A linked list of small objects: cheap to build, expensive to mark. */
    private static final class Node {
        final long value;
        final String text;
        Node next;

        Node(long value, String text, Node next) {
            this.value = value;
            this.text = text;
            this.next = next;
        }
    }

    private void churn(String seed) {
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        for (int e = 0; e < entriesPerRequest; e++) {
            Node head = null;
            for (int i = 0; i < nodesPerEntry; i++)
                head = new Node(rnd.nextLong(), i % 16 == 0 ? seed + i : null, head);
            cache.set(rnd.nextInt(cache.length()), head);
        }
        // Short-lived garbage, as a template engine would leave behind.
        long sink = 0;
        for (int i = 0; i < garbagePerRequest; i++)
            sink += new StringBuilder(32).append(seed).append(i).toString().length();
        if (sink == 42)
            ERRORS.incrementAndGet(); // keeps the loop from being optimised away
    }

    /** Page rendering cost: `units` times the base work, so that the request
     *  classes have distinct service times (the paper's work units). */
    private void render(StringBuilder page, int units) {
        long h = 17;
        int len = Math.max(page.length(), 1);
        for (long i = 0, n = (long) units * cpuWork; i < n; i++)
            h = h * 31 + (len == 1 ? i : page.charAt((int) (i % len)));
        blackhole = h;
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp)
            throws ServletException, IOException {
        String path = req.getPathInfo() == null ? "/" : req.getPathInfo();
        if (path.equals("/stats")) {
            if (req.getParameter("reset") != null) {
                closeIdle();
                BUSY_MAX.set(BUSY.get());
            }
            resp.setContentType("text/plain");
            PrintWriter w = resp.getWriter();
            w.printf("requests %d%nqueries %d%nerrors %d%nconnections %d%nbusy_max %d%n",
                     REQUESTS.get(), QUERIES.get(), ERRORS.get(), CONNECTIONS.get(),
                     BUSY_MAX.get());
            return;
        }
        BUSY_MAX.accumulateAndGet(BUSY.incrementAndGet(), Math::max);
        try {
            serve(req, resp, path);
        } finally {
            BUSY.decrementAndGet();
        }
    }

    private void serve(HttpServletRequest req, HttpServletResponse resp, String path)
            throws ServletException, IOException {
        REQUESTS.incrementAndGet();
        StringBuilder page = new StringBuilder(4096);
        Connection c = null;
        try {
            c = borrow();
            switch (path) {
            case "/story":
                story(c, page, longParam(req, "id", 1));
                break;
            case "/list":
                list(c, page);
                break;
            case "/search":
                search(c, page, req.getParameter("q") == null ? "a" : req.getParameter("q"));
                break;
            default:
                giveBack(c);
                resp.sendError(404);
                return;
            }
            giveBack(c);
        } catch (SQLException e) {
            ERRORS.incrementAndGet();
            if (c != null) {
                try {
                    discard(c);
                } catch (SQLException e2) {
                    e.addSuppressed(e2);
                }
            }
            throw new ServletException(e);
        }
        render(page, path.equals("/list") ? 1 : path.equals("/story") ? 2 : 3);
        churn(path);
        resp.setContentType("text/html");
        resp.getWriter().append("<html><body>").append(page).append("</body></html>\n");
    }

    private static long longParam(HttpServletRequest req, String name, long dflt) {
        try {
            return Long.parseLong(req.getParameter(name));
        } catch (NumberFormatException e) {
            return dflt;
        }
    }

    private static ResultSet query(PreparedStatement ps) throws SQLException {
        QUERIES.incrementAndGet();
        return ps.executeQuery();
    }

    private void story(Connection c, StringBuilder page, long id) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(dbCpuLoops > 0
                 ? "SELECT id, title, body, author, BENCHMARK(?, MD5(body)) FROM stories WHERE id = ?"
                 : "SELECT id, title, body, author, SLEEP(?) FROM stories WHERE id = ?")) {
            if (dbCpuLoops > 0)
                ps.setInt(1, dbCpuLoops);
            else
                ps.setDouble(1, dbDelay);
            ps.setLong(2, id);
            try (ResultSet rs = query(ps)) {
                while (rs.next())
                    page.append("<h1>").append(rs.getString(2)).append("</h1><p>")
                        .append(rs.getString(3)).append("</p><i>").append(rs.getString(4))
                        .append("</i>");
            }
        }
        try (PreparedStatement ps = c.prepareStatement(
                 "SELECT id, author, text FROM comments WHERE story_id = ? ORDER BY id LIMIT 10")) {
            ps.setLong(1, id);
            try (ResultSet rs = query(ps)) {
                while (rs.next())
                    page.append("<li>").append(rs.getString(2)).append(": ")
                        .append(rs.getString(3)).append("</li>");
            }
        }
    }

    private void list(Connection c, StringBuilder page) throws SQLException {
        // The SLEEP of a one-row derived table runs once per query, not per row.
        try (PreparedStatement ps = c.prepareStatement(
                 "SELECT s.id, s.title FROM stories s JOIN (SELECT SLEEP(?) AS z) d"
                 + " ORDER BY s.id DESC LIMIT 25")) {
            ps.setDouble(1, dbDelay);
            try (ResultSet rs = query(ps)) {
                List<String> rows = new ArrayList<>();
                while (rs.next())
                    rows.add("<li><a href=\"story?id=" + rs.getLong(1) + "\">" + rs.getString(2)
                             + "</a></li>");
                for (String r : rows)
                    page.append(r);
            }
        }
    }

    private void search(Connection c, StringBuilder page, String q) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(
                 "SELECT s.id, s.title FROM stories s JOIN (SELECT SLEEP(?) AS z) d"
                 + " WHERE s.title LIKE ? ORDER BY s.id LIMIT 10")) {
            ps.setDouble(1, dbDelay);
            ps.setString(2, q + "%");
            try (ResultSet rs = query(ps)) {
                while (rs.next())
                    page.append("<li>").append(rs.getString(2)).append("</li>");
            }
        }
    }
}
