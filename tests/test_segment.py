"""Chinese segmentation: the compiled segmenter must give exactly jieba's words (precise mode, HMM)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import jieba
import pytest

from simhash_filter.model.segment import CJK_RUN, SEGMENTER_ID, segment_run

ROOT = Path(__file__).resolve().parent.parent

jieba.setLogLevel(logging.WARNING)

#: Sentences written for this test: news, technical text, personal and place names, numbers and Latin
#: words mixed in, rare characters, long runs without punctuation.
SENTENCES = [
    "今天上午，市政府召开新闻发布会，介绍了今年城市更新工作的主要进展。",
    "王小明和李华在清华大学读研究生，研究方向是自然语言处理和机器翻译。",
    "这款手机搭载了6.7英寸的OLED屏幕，电池容量为5000毫安时，支持65W快充。",
    "我们使用Python 3.11和PostgreSQL 16搭建了数据分析平台，每天处理约2000万条记录。",
    "北京时间2024年5月14日晚上8点，长征五号运载火箭在文昌航天发射场点火升空。",
    "张伟平教授指出，深度学习模型在小样本场景下容易过拟合，需要引入正则化方法。",
    "上海浦东新区陆家嘴金融贸易区的写字楼空置率连续三个季度下降。",
    "欧阳娜娜和司马光都是复姓，诸葛亮的故事在民间流传甚广。",
    "服务器的内存从64GB升级到256GB以后，查询延迟从120毫秒降到了35毫秒。",
    "请在配置文件里把日志级别设置为WARNING，并关闭调试模式。",
    "南京市长江大桥是中国第一座自行设计建造的双层式铁路公路两用桥梁。",
    "研究生命起源的科学家们在深海热泉附近发现了新的微生物群落。",
    "他说的确实在理，但是这件事情的确需要再讨论一下。",
    "结婚的和尚未结婚的都需要填写这张表格。",
    "乒乓球拍卖完了，羽毛球拍还有三副。",
    "工信部发布的数据显示，一季度全国移动互联网累计流量达到八百亿吉字节。",
    "小区物业在楼道里安装了烟雾报警器，并定期检查消防通道是否畅通。",
    "陈师傅在山腰的茶园里采摘明前茶，一芽一叶，手法十分讲究。",
    "这篇论文提出了一种基于图神经网络的推荐算法，在三个公开数据集上取得了最好成绩。",
    "哈尔滨的冰雪大世界每年冬天都吸引大量游客前来参观。",
    "公司第三季度营业收入同比增长百分之十二点五，净利润约为三点二亿元。",
    "程序员在凌晨三点修复了一个导致支付接口超时的并发问题。",
    "苏轼在黄州写下了前赤壁赋，这篇文章至今仍被中学课本收录。",
    "乌鲁木齐到喀什的动车开通以后，两地之间的旅行时间大大缩短。",
    "用户反馈说应用在安卓十四系统上偶尔会闪退，开发团队正在排查原因。",
    "气象台预计明天白天多云转阴，最高气温二十三摄氏度，夜间有小雨。",
    "这家合作社把鲜叶加工成绿茶和红茶，通过电商平台销往全国各地。",
    "区块链技术在供应链金融中的应用仍然面临监管和标准化方面的挑战。",
    "马云、马化腾和李彦宏曾经同时出现在一次互联网大会上。",
    "图书馆的自助借还机支持身份证和读者证两种方式办理借阅手续。",
    "他从广州白云机场乘坐早班飞机，中午就到了成都双流机场。",
    "操作系统内核负责进程调度、内存管理和设备驱动等底层工作。",
    "孩子们在博物馆里看到了恐龙化石，兴奋得大声喊叫起来。",
    "这座古镇保留了大量明清时期的民居，青石板路两旁是白墙黛瓦。",
    "新能源汽车的续航里程已经普遍超过五百公里，充电桩数量也在快速增长。",
    "龘靐齉爩是一些笔画很多的生僻字，普通输入法很难打出来。",
    "我爱北京天安门天安门上太阳升伟大领袖毛主席指引我们向前进",
    "中华人民共和国国务院关于进一步加强城市规划建设管理工作的若干意见",
    "研究表明每天步行三十分钟可以降低心血管疾病的风险",
    "那个穿红衣服的女孩叫林婉清，她是隔壁班新来的转学生。",
    "使用Docker容器部署微服务时，需要注意镜像体积和启动顺序。",
    "黄河、长江、珠江、淮河和海河是中国的主要河流。",
    "李白的静夜思：床前明月光，疑是地上霜。",
    "他在GitHub上开源了一个用Rust编写的高性能分词库。",
]


def runs() -> list[str]:
    out = [r for s in SENTENCES for r in CJK_RUN.findall(s)]
    assert len(out) > 80
    return out


def test_sentences_cover_many_runs() -> None:
    """The corpus below is varied: many runs, long and short, with numbers and Latin words between them."""
    lengths = [len(r) for r in runs()]
    assert max(lengths) >= 25
    assert min(lengths) == 1
    assert sum(any(c.isascii() and c.isalnum() for c in s) for s in SENTENCES) >= 6


@pytest.mark.parametrize("sentence", SENTENCES)
def test_segment_run_matches_jieba(sentence: str) -> None:
    """segment_run gives exactly jieba.lcut(run, HMM=True) on every CJK run of the sentence."""
    for run in CJK_RUN.findall(sentence):
        assert list(segment_run(run)) == jieba.lcut(run, HMM=True), run


def test_segment_run_matches_jieba_on_a_whole_article() -> None:
    """A long run built from many sentences segments like jieba too (the HMM sees unknown words)."""
    long_run = "".join(runs())
    assert list(segment_run(long_run)) == jieba.lcut(long_run, HMM=True)


def test_single_character_runs_are_words() -> None:
    """A one-character run is one word."""
    assert segment_run("的") == ("的",)


def test_segmenter_is_recorded_in_the_model() -> None:
    """The segmenter name pins the jieba version it must agree with."""
    assert f"jieba-{jieba.__version__}" in SEGMENTER_ID


def test_cjk_run_covers_extension_a_and_compatibility_ideographs() -> None:
    """Runs include CJK extension A and compatibility ideographs, and stop at punctuation and Latin."""
    assert CJK_RUN.findall("㐀㐁中文，abc漢字豈更") == ["㐀㐁中文", "漢字豈更"]


LAZY = """
import json, sys
from simhash_filter import fingerprint
from simhash_filter.model.weights import chinese_table
page = "<html><body><p>" + " ".join(f"estuary harrier reed bed number {i}" for i in range(20)) + "</p></body></html>"
assert fingerprint(page).ok
loaded = sorted(m for m in ("jieba", "rjieba", "wordfreq") if m in sys.modules)
print(json.dumps({"loaded": loaded, "chinese_table": chinese_table.cache_info().currsize}))
"""


def test_english_pages_never_load_chinese_tables_and_warm_starts_read_the_cache(tmp_path: Path) -> None:
    """Without Chinese text neither jieba's dictionary nor its IDF table is loaded; once the IDF cache
    exists, a new process imports neither wordfreq nor jieba."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", LAZY], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
    assert runs[0]["chinese_table"] == runs[1]["chinese_table"] == 0
    assert "rjieba" not in runs[0]["loaded"] and "jieba" not in runs[0]["loaded"]
    assert runs[1]["loaded"] == []
    assert [p.name.startswith("idf-en-") for p in (tmp_path / "simhash-filter").iterdir()] == [True]
