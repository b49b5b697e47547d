"""Chains, benchmark tables and the device model."""
import json

import pytest

from fuseflow.errors import UserError
from fuseflow.gpu.problem.benchmarks import BENCHMARKS, parse_chain
from fuseflow.gpu.problem.chains import Chain, conv_chain
from fuseflow.gpu.problem.device import Device, load_device


def test_26_benchmarks_with_table_extents():
    assert len([k for k in BENCHMARKS if k[0] == "G"]) == 10
    assert len([k for k in BENCHMARKS if k[0] == "S"]) == 8
    assert len([k for k in BENCHMARKS if k[0] == "C"]) == 8
    assert BENCHMARKS["G3"].dims == (128, 512, 416, 256)          # Table VII row G3
    assert BENCHMARKS["S2"].dims == (128, 5632, 2048, 2048)       # Table VI row S2
    assert all(BENCHMARKS[f"S{i}"].gated for i in range(1, 9))


@pytest.mark.parametrize("name,ic,hw,oc1,oc2,k1", [
    ("C1", 64, 56, 256, 64, 1), ("C4", 512, 7, 2048, 512, 1), ("C5", 64, 56, 64, 256, 3),
    ("C8", 512, 7, 512, 2048, 3)])
def test_conv_chains_lower_by_im2col(name, ic, hw, oc1, oc2, k1):
    # M = H*W*batch, N = OC1, K = IC*k1^2, L = OC2 (Table V, batch 1)
    assert BENCHMARKS[name].dims == (hw * hw, oc1, ic * k1 * k1, oc2)


def test_conv_batch_multiplies_m():
    assert conv_chain("b", 64, 7, 64, 64, 1, batch=4).M == 4 * 7 * 7


def test_parse_chain_forms():
    assert parse_chain("g5") is BENCHMARKS["G5"]
    ffn = parse_chain("ffn:128,256,64,32:gelu")
    assert (ffn.dims, ffn.act) == ((128, 256, 64, 32), "gelu")
    gated = parse_chain("gated:128,256,64,32:sequential")
    assert gated.strategies == ("sequential",)
    assert parse_chain("gated:128,256,64,32").strategies == ("sequential", "spatial")
    assert parse_chain("conv:64,56,256,64,1").dims == BENCHMARKS["C1"].dims


@pytest.mark.parametrize("text,needle", [
    ("G11", "benchmark id"), ("ffn:1,2,3", "4 extents"), ("ffn:a,b,c,d", "integers"),
    ("ffn:64,64,64,64:tanh", "activation"), ("gated:64,64,64,64:both", "strategy"),
    ("conv:1,2,3", "IC,HW"), ("ffn:64,0,64,64", "positive")])
def test_parse_chain_errors_name_what_and_where(text, needle):
    with pytest.raises(UserError, match=needle) as err:
        parse_chain(text)
    assert err.value.where


def test_device_defaults_h100():
    d = Device()
    assert (d.sms, d.max_cluster, d.smem_per_block) == (132, 16, 227 * 1024)
    bws = [d.dsm_bandwidth(s) for s in (2, 4, 8, 16)]
    assert bws == sorted(bws, reverse=True)          # DSM bandwidth falls as clusters grow
    assert d.resident_blocks(1) == d.sms


def test_device_overrides_from_json_and_toml(tmp_path):
    j = tmp_path / "d.json"
    j.write_text(json.dumps({"name": "H800", "bw_global": 2.0e12, "bw_dsm": {"2": 1, "4": 1, "8": 1, "16": 1}}))
    d = load_device(str(j))
    assert (d.name, d.bw_global, d.bw_dsm[16], d.sms) == ("H800", 2.0e12, 1.0, 132)
    t = tmp_path / "d.toml"
    t.write_text('smem_per_block = 100000\nmax_cluster = 8\n[bw_dsm]\n"2" = 3e12\n"4" = 2e12\n"8" = 1e12\n')
    d = load_device(str(t))
    assert (d.smem_per_block, d.max_cluster) == (100000, 8)


@pytest.mark.parametrize("content,needle", [
    ('{"smem": 1}', "unknown device field 'smem'"), ('{"sms": "many"}', "bad value"),
    ('{"sms": 100}', "gpc_sms"), ("{not json", "not valid JSON"), ('[1, 2]', "table of fields"),
    ('{"bw_dsm": {"2": 1}}', "cluster size 4")])
def test_device_file_errors_name_the_file(tmp_path, content, needle):
    f = tmp_path / "bad.json"
    f.write_text(content)
    with pytest.raises(UserError, match=needle):
        load_device(str(f))


def test_missing_device_file():
    with pytest.raises(UserError, match="cannot read"):
        load_device("/nonexistent/device.json")


def test_chain_validation():
    with pytest.raises(UserError, match="kind"):
        Chain("x", "attention", 1, 1, 1, 1)
    with pytest.raises(UserError, match="gated chains only"):
        Chain("x", "ffn", 16, 16, 16, 16, strategy="spatial")
