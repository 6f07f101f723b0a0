#!/usr/bin/python3
"""Drives Wireshark's GUI with plugin/sqos.lua loaded and reports what Statistics > SQOS Flows shows.

Run by tests/it/plugin_gui.rs inside `dbus-run-session` (the accessibility bus needs a session bus):

    dbus-run-session -- /usr/bin/python3 plugin/test/gui_driver.py PLUGIN SQOS CAPTURE PACKETS [PNG]

It starts its own X server (Xvfb), the AT-SPI accessibility bus and registry, and Wireshark with a
fresh profile, no capture file and the plugin's preference pointing at the sqos program SQOS,
then, like a user:

  1. opens Statistics > SQOS Flows before any capture is loaded (window "before");
  2. opens CAPTURE with File > Open (Ctrl+O, path typed into the file dialog); the open window
     follows the packets as they are read ("followed_open");
  3. opens Statistics > SQOS Flows again ("menu_after_open");
  4. reloads the file (View > Reload, Ctrl+R); both windows follow ("first_after_reload",
     "second_after_reload") and a third one opened then shows the same ("menu_after_reload");
  5. quits (Ctrl+Q): the plugin's temporary files ($TMPDIR, a directory of this run) are gone.

The menu is opened with the keyboard (Alt+S) and the item clicked with the mouse (xdotool); the
item's position and the windows' text are read through Qt's accessibility interface (AT-SPI), so
what is compared is what the window shows. Any other window that appears (a Lua error dialog, an
error message box) is reported as an error, with its text. Prints one JSON object on stdout.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

PLUGIN, SQOS, CAPTURE, PACKETS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
SCREENSHOT = sys.argv[5] if len(sys.argv) > 5 else None
WINDOW_TITLE = "SQOS Flows"
TIMEOUT = 90.0

children = []
errors = []
steps = []


def log(msg):
    steps.append("%.1f %s" % (time.monotonic() - T0, msg))


def start(args, **kw):
    p = subprocess.Popen(args, **kw)
    children.append(p)
    return p


def wait_for(what, fn, timeout=TIMEOUT, every=0.25):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for " + what)
        pump(every)


def xdo(*args):
    subprocess.run(["xdotool", *args], check=True, env=ENV, capture_output=True)


# --- an X server, the accessibility bus, Wireshark ------------------------------------------
T0 = time.monotonic()
work = tempfile.mkdtemp(prefix="sqosa-gui-")
TMP = os.path.join(work, "tmp")
WIRESHARK = None
ws_err = open(os.path.join(work, "wireshark.err"), "w+")
ENV = dict(os.environ)
pyatspi = Atspi = GLib = None


class NoBridge(RuntimeError):
    """Qt's accessibility bridge never reached the bus: the harness cannot read the GUI here
    (even with the CPUs kept busy during start-up: see setup())."""


def setup():
    global pyatspi, Atspi, GLib, WIRESHARK
    rfd, wfd = os.pipe()
    start(["Xvfb", "-displayfd", str(wfd), "-screen", "0", "1280x1000x24", "-nolisten", "tcp"],
          pass_fds=(wfd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(wfd)
    display = b""
    while not display.endswith(b"\n"):
        chunk = os.read(rfd, 16)
        if not chunk:
            raise RuntimeError("Xvfb did not start")
        display += chunk
    os.close(rfd)
    ENV.update({
        "DISPLAY": ":" + display.decode().strip(),
        "HOME": os.path.join(work, "home"),  # a fresh Wireshark profile
        "XDG_CONFIG_HOME": os.path.join(work, "home", ".config"),
        "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
        "QT_ACCESSIBILITY": "1",
        "QT_LOGGING_RULES": "qt.accessibility.atspi=true",  # says when the bridge failed
        "TMPDIR": TMP,  # where the plugin keeps its copy of the capture: checked at the end
    })
    os.makedirs(ENV["XDG_CONFIG_HOME"])
    os.makedirs(TMP)
    os.environ.update(ENV)  # for libatspi in this process
    # Without DISPLAY the launcher does not also publish the bus on the X root window: with
    # both, Qt's bridge connects twice and sometimes ends up with no connection at all.
    no_x = {k: v for k, v in ENV.items() if k != "DISPLAY"}
    start(["/usr/libexec/at-spi-bus-launcher", "--launch-immediately"], env=no_x,
          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    start(["/usr/libexec/at-spi2-registryd"], env=ENV, stdout=subprocess.DEVNULL,
          stderr=subprocess.DEVNULL)
    # The registry answers (asked from another process: see below).
    wait_for("the accessibility registry", lambda: subprocess.run(
        [sys.executable, "-c", PROBE], env=ENV, capture_output=True, text=True
    ).stdout.strip() in ("0", "1"), timeout=30, every=0.5)
    import pyatspi as p  # connects to the accessibility bus when imported
    from gi.repository import Atspi as a, GLib as g
    pyatspi, Atspi, GLib = p, a, g
    # Ask the registry in this process only once Wireshark has registered with it (it does
    # at the end of its start-up): libatspi does not see an application that registers after
    # this process's first question. Until then, ask from a new process each time.
    # Qt's bridge sometimes fails to reach the bus at start-up (it says "Error in contacting
    # registry" at once, seen in about half of the starts here): start Wireshark again then.
    for attempt in range(30):  # ~0.7 s each; up to 9 were needed in 3 runs here
        log("starting wireshark")
        ws_err.seek(0, os.SEEK_END)
        mark = ws_err.tell()
        # Qt 5's bridge races its own D-Bus thread: on an idle machine its first call to the
        # registry goes out before the connection is up ("Not connected to D-Bus server") on
        # nearly every start; with the CPUs busy it connects (measured: 0 of 15 idle starts
        # reached the bus, under load the run passed). So keep the CPUs busy while it starts.
        burners = [subprocess.Popen(["sh", "-c", "while :; do :; done"])
                   for _ in range(2 * (os.cpu_count() or 2))]
        wireshark = start(["wireshark", "-X", "lua_script:" + PLUGIN, "-o", "sqosa.sqos:" + SQOS],
                          env=ENV, stdout=subprocess.DEVNULL, stderr=ws_err)

        def state():
            ws_err.seek(mark)
            if "Error in contacting registry" in ws_err.read():
                return "failed"
            probe = subprocess.run([sys.executable, "-c", PROBE], env=ENV,
                                   capture_output=True, text=True)
            return "up" if probe.stdout.strip() == "1" else None

        try:
            up = wait_for("Wireshark on the accessibility bus", state, timeout=60,
                          every=0.5) == "up"
        finally:
            for b in burners:
                b.kill()
                b.wait()
        if up:
            WIRESHARK = wireshark
            break
        wireshark.terminate()
        wireshark.wait(timeout=10)
        # A killed Wireshark cannot remove the plugin's files (a quit one does: checked below).
        shutil.rmtree(TMP)
        os.makedirs(TMP)
        ws_err.seek(0, os.SEEK_END)
        ws_err.write("(Qt did not reach the accessibility bus: Wireshark started again)\n")
    else:
        raise NoBridge("Wireshark never appeared on the accessibility bus")
    # Names, states and children from the application every time, not from libatspi's cache
    # (which follows the application through events).
    pyatspi.Registry.getDesktop(0).set_cache_mask(Atspi.Cache.NONE)


PROBE = ("import pyatspi; d = pyatspi.Registry.getDesktop(0); "
         "print(sum(d.getChildAtIndex(i).name == 'Wireshark' for i in range(d.childCount)))")


def pump(secs):
    """Let libatspi handle the accessibility bus's events for `secs` seconds."""
    end = time.monotonic() + secs
    if GLib is None:
        time.sleep(secs)
        return
    ctx = GLib.MainContext.default()
    while True:
        while ctx.iteration(False):
            pass
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(0.05, left))


# --- the accessibility tree -------------------------------------------------------------------
def app():
    desk = pyatspi.Registry.getDesktop(0)
    for i in range(desk.childCount):
        a = desk.getChildAtIndex(i)
        if a is not None and a.name == "Wireshark":
            return a
    return None


def showing(acc):
    try:
        return acc.getState().contains(pyatspi.STATE_SHOWING)
    except Exception:
        return False


def top_windows():
    a = app()
    if a is None:
        return []
    out = []
    for i in range(a.childCount):
        w = a.getChildAtIndex(i)
        if w is not None and showing(w):
            out.append(w)
    return out


def main_window():
    for w in top_windows():
        for i in range(w.childCount):
            c = w.getChildAtIndex(i)
            if c is not None and c.getRoleName() == "menu bar":
                return w
    return None


def child_named(acc, role, name):
    for i in range(acc.childCount):
        c = acc.getChildAtIndex(i)
        if c is not None and c.getRoleName() == role and c.name == name:
            return c
    return None


def find_all(acc, pred, depth=0, out=None):
    out = [] if out is None else out
    if acc is None or depth > 8:
        return out
    if pred(acc):
        out.append(acc)
    for i in range(acc.childCount):
        find_all(acc.getChildAtIndex(i), pred, depth + 1, out)
    return out


def flows_windows():
    return [w for w in top_windows() if w.name.endswith(WINDOW_TITLE)]


def window_text(w):
    # The QTextEdit: the multi-line text widget (the other one is the "Highlight:" field).
    edits = find_all(w, lambda a: a.getRoleName() == "text"
                     and a.getState().contains(pyatspi.STATE_MULTI_LINE))
    if len(edits) != 1:
        raise RuntimeError("%r: %d multi-line text widgets" % (w.name, len(edits)))
    t = edits[0].queryText()
    return t.getText(0, t.characterCount)


def all_text(acc):
    parts = []
    for a in find_all(acc, lambda a: a.getRoleName() in ("label", "text")):
        try:
            parts.append(a.queryText().getText(0, -1) if a.getRoleName() == "text" else a.name)
        except Exception:
            parts.append(a.name)
    return " | ".join(p for p in parts if p)


def check_no_stray_windows(allowed_flows):
    """Every showing top-level window is the main window or one of our flow windows."""
    flows = flows_windows()
    main = main_window()
    for w in top_windows():
        if w in flows or w == main:
            continue
        errors.append("unexpected window %r (%s): %s" % (w.name, w.getRoleName(), all_text(w)))
    if len(flows) != allowed_flows:
        errors.append("%d SQOS Flows windows showing, expected %d" % (len(flows), allowed_flows))


def packets_label():
    m = main_window()
    if m is None:
        return ""
    bar = next((m.getChildAtIndex(i) for i in range(m.childCount)
                if m.getChildAtIndex(i).getRoleName() == "status bar"), None)
    if bar is None:
        return ""
    labels = find_all(bar, lambda a: a.getRoleName() == "label" and a.name.startswith("Packets:"))
    return labels[0].name if labels else ""


def loaded():
    want = "Packets: %d · Displayed: %d" % (PACKETS, PACKETS)
    return packets_label().startswith(want)


def focus_main():
    m = wait_for("the main window", main_window)
    title = m.name
    ids = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "^" + title + "$"],
                         env=ENV, capture_output=True, text=True).stdout.split()
    if not ids:
        raise RuntimeError("no X window for %r" % title)
    xdo("windowfocus", "--sync", ids[0])
    return m


# --- the user's steps -------------------------------------------------------------------------
def open_menu():
    """Statistics (Alt+S) > SQOS Flows (a mouse click on the item); returns the new window."""
    before = flows_windows()
    m = focus_main()
    xdo("key", "alt+s")
    bar = next(m.getChildAtIndex(i) for i in range(m.childCount)
               if m.getChildAtIndex(i).getRoleName() == "menu bar")
    stats = child_named(bar, "menu item", "Statistics")
    popup = stats.getChildAtIndex(0)
    item = child_named(popup, "menu item", "SQOS Flows")
    if item is None:
        raise RuntimeError("no 'SQOS Flows' item in the Statistics menu")
    wait_for("the Statistics menu", lambda: showing(item), timeout=10)
    ext = item.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
    log("menu item 'SQOS Flows' at %d,%d %dx%d" % (ext.x, ext.y, ext.width, ext.height))
    xdo("mousemove", str(ext.x + ext.width // 2), str(ext.y + ext.height // 2))
    time.sleep(0.3)
    xdo("click", "1")
    n = len(before) + 1
    wait_for("the SQOS Flows window", lambda: len(flows_windows()) == n, timeout=20)
    new = [w for w in flows_windows() if w not in before]
    return new[0] if new else flows_windows()[-1]


def settled_text(w, quiet=4.0, timeout=45.0):
    """The window's text once it has not changed for `quiet` seconds (Wireshark redraws taps
    every 3 s while packets are read)."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        t = window_text(w)
        if t != last:
            last, since = t, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return t
        pump(0.25)
    raise RuntimeError("the SQOS Flows window kept changing")


result = {"stages": {}, "errors": errors, "steps": steps}
try:
    setup()
    wait_for("Wireshark's main window", main_window)
    log("main window: " + main_window().name)
    time.sleep(1.0)
    check_no_stray_windows(0)

    w1 = open_menu()
    result["stages"]["before"] = settled_text(w1, quiet=1.0)
    check_no_stray_windows(1)

    focus_main()
    xdo("key", "ctrl+o")
    dialog = wait_for("the Open dialog",
                      lambda: next((w for w in top_windows() if "Open Capture File" in w.name),
                                   None), timeout=20)
    log("dialog: " + dialog.name)
    time.sleep(1.0)
    ids = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "Open Capture File"],
                         env=ENV, capture_output=True, text=True).stdout.split()
    xdo("windowfocus", "--sync", ids[0])
    xdo("type", "--delay", "20", os.path.abspath(CAPTURE))
    xdo("key", "Return")
    wait_for("the capture to be read", loaded, timeout=120)
    log("loaded: " + packets_label())
    result["stages"]["followed_open"] = settled_text(w1)
    check_no_stray_windows(1)

    w2 = open_menu()
    result["stages"]["menu_after_open"] = settled_text(w2, quiet=1.0)
    check_no_stray_windows(2)

    focus_main()
    # The first line says when the window was last updated: the windows are redrawn only when
    # packets are read, so a new time there shows the file was read again.
    marker = window_text(w1).splitlines()[0]
    time.sleep(1.2)
    xdo("key", "ctrl+r")
    wait_for("the windows to follow the reload",
             lambda: window_text(w1).splitlines()[0] != marker, timeout=30)
    wait_for("the capture to be read again", loaded, timeout=120)
    log("reloaded: " + packets_label())
    result["stages"]["first_after_reload"] = settled_text(w1)
    result["stages"]["second_after_reload"] = settled_text(w2, quiet=0.5)
    w3 = open_menu()
    result["stages"]["menu_after_reload"] = settled_text(w3, quiet=1.0)
    check_no_stray_windows(3)

    if SCREENSHOT:
        title = w3.name
        ids = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", title],
                             env=ENV, capture_output=True, text=True).stdout.split()
        xdo("windowmove", "--sync", ids[-1], "0", "0")
        xdo("windowsize", "--sync", ids[-1], "1240", "420")
        time.sleep(1.0)
        subprocess.run(["import", "-window", ids[-1], SCREENSHOT], env=ENV, check=True)

    # Quit as a user does (Ctrl+Q): Wireshark closes its Lua state, and the plugin removes its
    # copy of the capture and its other files from the temporary directory.
    focus_main()
    xdo("key", "ctrl+q")
    wait_for("Wireshark to quit", lambda: WIRESHARK.poll() is not None, timeout=60)
    log("quit, exit status %d" % WIRESHARK.returncode)
    # (Qt keeps its runtime-root there too, without XDG_RUNTIME_DIR.)
    left = sorted(f for f in os.listdir(TMP) if f.startswith("sqosa-"))
    if left:
        errors.append("the plugin left its temporary files behind: %s" % left)
except NoBridge as e:  # the harness, not the plugin: reported apart from errors
    result["unreadable"] = str(e)
except Exception as e:  # reported, with what was seen so far
    errors.append("driver: %s: %s" % (type(e).__name__, e))
finally:
    for p in reversed(children):
        p.terminate()
    for p in reversed(children):
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    ws_err.seek(0)
    stderr = ws_err.read()
    result["wireshark_stderr"] = stderr
    for line in stderr.splitlines():
        # Lua's messages, and Wireshark's own errors ("[... ERROR]", "[... CRITICAL]"); Qt's
        # accessibility warnings are "[GUI WARNING]".
        if "lua" in line.lower() or " ERROR]" in line or " CRITICAL]" in line:
            errors.append("wireshark stderr: " + line)
    shutil.rmtree(work, ignore_errors=True)
    json.dump(result, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")
