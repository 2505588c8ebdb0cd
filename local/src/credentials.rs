//! Development credentials generated on first start and kept in the data
//! dir (`api-key`, `jwt-secret`, mode 0600), so restarts keep working tokens.

use std::fs;
use std::io::Write;
use std::path::Path;

use webhook_core::secret;

pub struct Credentials {
    pub api_key: String,
    pub jwt_secret: String,
}

impl Credentials {
    pub fn load_or_create(dir: &Path) -> Result<Self, String> {
        fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create data dir {}: {e}", dir.display()))?;
        Ok(Credentials {
            api_key: read_or_write(&dir.join("api-key"), secret::new_api_key)?,
            jwt_secret: read_or_write(&dir.join("jwt-secret"), || {
                secret::random_bytes::<32>()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            })?,
        })
    }
}

/// Reads the file, or creates it with a fresh value. Creation is exclusive,
/// so two processes starting at once agree on one value.
fn read_or_write(path: &Path, make: impl FnOnce() -> String) -> Result<String, String> {
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(mut file) => {
            let value = make();
            file.write_all(value.as_bytes()).map_err(fail)?;
            Ok(value)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // The creator may still be writing: wait for a value to appear.
            for _ in 0..50 {
                let value = fs::read_to_string(path).map_err(fail)?;
                if !value.trim().is_empty() {
                    return Ok(value.trim().to_owned());
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(format!("{} is empty", path.display()))
        }
        Err(e) => Err(fail(e)),
    }
}
