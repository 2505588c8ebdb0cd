//! nginx serving one file on a free loopback port: what the bytes of an answer
//! cost to serve when nothing has to be computed (the list scenario's
//! reference, issue 26). Found on `PATH` or in `/usr/sbin`; none, no scenario.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An nginx of its own (configuration, pid file and logs in a temporary
/// directory); stopped when dropped.
pub struct StaticFile {
    child: Child,
    pub addr: SocketAddr,
    /// The file's path in the URL (`/page.json`).
    pub path: String,
    _dir: tempfile::TempDir,
}

/// The nginx binary, if installed.
pub fn binary() -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nginx"))
        .find(|p| p.is_file())
}

impl StaticFile {
    /// A webhook callback (the burst suite's): answers the handshake's `GET`
    /// with its `validation-token` echoed and every `POST` with `200` at
    /// once, and writes two bytes per `POST` to `posts.log`, so
    /// [`StaticFile::posts`] counts them. `path` is `/callback`.
    pub fn callback(nginx: &Path) -> Result<StaticFile, String> {
        Self::start(nginx, b"", true)
    }

    /// `POST`s answered so far (a [`StaticFile::callback`] only).
    pub fn posts(&self) -> u64 {
        std::fs::metadata(self._dir.path().join("posts.log")).map_or(0, |m| m.len() / 2)
    }

    /// Serves `body` as `/page.json` (`application/json`), keep-alive without
    /// a request limit, no access log, one worker per core.
    pub fn serve(nginx: &Path, body: &[u8]) -> Result<StaticFile, String> {
        Self::start(nginx, body, false)
    }

    fn start(nginx: &Path, body: &[u8], callback: bool) -> Result<StaticFile, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let www = dir.path().join("www");
        std::fs::create_dir(&www).map_err(|e| e.to_string())?;
        std::fs::write(www.join("page.json"), body).map_err(|e| e.to_string())?;
        // Run as root, nginx's workers switch to `nobody`: let them read it.
        for p in [dir.path(), &www] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| e.to_string())?;
        }
        // A free port: taken from the kernel, released, then bound by nginx.
        let addr = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?;
        let d = dir.path().display();
        let server = if callback {
            format!(
                "map $request_method $posted {{ POST 1; default 0; }}\n  \
                 log_format two \"p\";\n  \
                 server {{ listen {addr};\n    access_log {d}/posts.log two if=$posted;\n    \
                 location / {{ add_header validation-token $http_validation_token always; return 200 \"ok\"; }}\n  }}"
            )
        } else {
            format!(
                "server {{ listen {addr}; root {www}; }}",
                www = www.display()
            )
        };
        let conf = format!(
            "daemon off;\nworker_processes auto;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  keepalive_requests 100000000;\n  \
             client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  \
             fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  \
             types {{ application/json json; }}\n  \
             {server}\n}}\n"
        );
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).map_err(|e| e.to_string())?;
        let child = Command::new(nginx)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", nginx.display()))?;
        let mut file = StaticFile {
            child,
            addr,
            path: if callback { "/callback" } else { "/page.json" }.into(),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            if Instant::now() > deadline {
                return Err(format!("nginx did not listen on {addr} within 10 s"));
            }
            if let Ok(Some(status)) = file.child.try_wait() {
                return Err(format!(
                    "nginx exited ({status}) before listening on {addr}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(file)
    }
}

impl Drop for StaticFile {
    fn drop(&mut self) {
        // SIGTERM to the master stops its workers too (a SIGKILL would not).
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}
