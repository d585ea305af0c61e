//! Two virtual hosts for the MPI test: network namespaces joined by a veth pair, so that the
//! ranks' traffic really crosses a network interface, as between boards. Open MPI starts the
//! remote rank through an rsh agent that runs `ip netns exec HOST …` (the namespaces share the
//! file system, so the same binaries run on both).
//!
//! The addresses exist only inside the two namespaces this process makes and removes.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The two hosts; removed (namespaces, veth pair, agent script) when dropped.
pub struct Hosts {
    names: [String; 2],
    dir: PathBuf,
}

/// The hosts' addresses, one per namespace, on their own veth pair.
pub const ADDRESSES: [&str; 2] = ["10.77.0.1", "10.77.0.2"];
const SUBNET: &str = "10.77.0.0/24";

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("`ip` cannot run: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Hosts {
    /// Makes the two hosts, or says why it cannot (not root, no iproute2, no namespaces).
    pub fn make() -> Result<Hosts, String> {
        let tag = std::process::id();
        let names = [format!("rimms{tag}a"), format!("rimms{tag}b")];
        let dir = std::env::temp_dir().join(format!("rimms-netns-{tag}"));
        let hosts = Hosts {
            names: names.clone(),
            dir,
        };
        for name in &names {
            ip(&["netns", "add", name])?;
        }
        let veth = [format!("rv{tag}a"), format!("rv{tag}b")];
        ip(&[
            "link", "add", &veth[0], "type", "veth", "peer", "name", &veth[1],
        ])?;
        for ((name, dev), addr) in names.iter().zip(&veth).zip(ADDRESSES) {
            ip(&["link", "set", dev, "netns", name])?;
            ip(&["-n", name, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ip(&["-n", name, "link", "set", dev, "up"])?;
            ip(&["-n", name, "link", "set", "lo", "up"])?;
        }
        std::fs::create_dir_all(&hosts.dir).map_err(|e| e.to_string())?;
        let agent = format!(
            "#!/bin/sh\nhost=\"$1\"; shift\ncase \"$host\" in\n  {}) ns={} ;;\n  {}) ns={} ;;\n  *) echo \"no host $host\" >&2; exit 1 ;;\nesac\nexec ip netns exec \"$ns\" sh -c \"$*\"\n",
            ADDRESSES[0], names[0], ADDRESSES[1], names[1]
        );
        std::fs::write(hosts.agent(), agent).map_err(|e| e.to_string())?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(hosts.agent(), std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        Ok(hosts)
    }

    fn agent(&self) -> PathBuf {
        self.dir.join("agent.sh")
    }

    /// `mpirun` of `np` ranks of `exe`, one per host, started from the first host, with MPI's
    /// traffic (its out-of-band channel and its data) on the hosts' subnet only.
    pub fn mpirun(&self, exe: &Path) -> Command {
        let mut run = Command::new("ip");
        let hosts = format!("{}:1,{}:1", ADDRESSES[0], ADDRESSES[1]);
        run.args([
            "netns",
            "exec",
            &self.names[0],
            "mpirun",
            "-np",
            "2",
            "--host",
            &hosts,
        ])
        .args(["--mca", "plm_rsh_agent"])
        .arg(self.agent())
        .args(["--mca", "btl", "self,tcp"])
        .args(["--mca", "btl_tcp_if_include", SUBNET])
        .args(["--mca", "oob_tcp_if_include", SUBNET])
        .arg(exe);
        run
    }

    /// Bytes that left the first host through its veth end.
    pub fn bytes_sent(&self) -> Option<u64> {
        let out = Command::new("ip")
            .args(["-n", &self.names[0], "-s", "-j", "link", "show"])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        // The veth end's entry; `lo` is the other. JSON without a parser: the first
        // `"tx":{"bytes":N` after its name.
        let at = text.find("\"rv")?;
        let tx = text[at..].find("\"tx\":{\"bytes\":")? + at + "\"tx\":{\"bytes\":".len();
        let digits: String = text[tx..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // Removing a namespace removes the veth end inside it, and so the pair.
        for name in &self.names {
            let _ = ip(&["netns", "del", name]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
