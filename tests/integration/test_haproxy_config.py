"""HAProxy itself accepts the configuration the kit renders for it (`haproxy -c`)."""
import shutil
import subprocess

import pytest

from visitkit.twin import haproxy

pytestmark = pytest.mark.timeout(60)  # seconds: each test takes one or two


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy is not installed")
def test_haproxy_accepts_the_configuration(tmp_path, haproxy_config):
    (tmp_path / "429.http").write_text(haproxy.TOO_MANY_REQUESTS)
    (tmp_path / "haproxy.cfg").write_text(haproxy_config())
    result = subprocess.run(["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
