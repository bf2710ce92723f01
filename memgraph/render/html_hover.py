"""The HTML timeline's hover: the plotted columns as JSON and a few lines of script that show the split
of the column under the pointer (no library, nothing fetched)."""

from __future__ import annotations

import json

from memgraph.render.html_chart import Chart


def hover_data(chart: Chart, xs: list[float], colors: list[str], plot: dict[str, float]) -> str:
    """The columns as JSON for :data:`HOVER_JS`: ``xs`` their left edges (and the right end) in SVG units,
    ``colors`` one per category, ``plot`` the plot area (left, right, top, bottom, w). ``<``, ``>`` and
    ``&`` are escaped, so no text can close the script element."""
    data = {
        **plot, "xs": xs, "cats": chart.categories, "colors": colors,
        "cols": [[c.event, c.iteration, c.phase, c.bytes, c.reserved, [c.by_category.get(k, 0) for k in chart.categories]]
                 for c in chart.columns],
    }
    return json.dumps(data, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


HOVER_JS = """(function(){
var fig=document.getElementById('timeline');if(!fig)return;
var d=JSON.parse(document.getElementById('timeline-data').textContent);
var svg=fig.querySelector('svg'),tip=fig.querySelector('.tip'),cur=svg.querySelector('.cursor');
function fmt(n){var u=['B','KiB','MiB','GiB','TiB'],i=0;while(Math.abs(n)>=1024&&i<4){n/=1024;i++;}return i?n.toFixed(2)+' '+u[i]:n+' B';}
function row(t,color,v){var r=document.createElement('div');if(color){var s=document.createElement('i');s.className='swatch';s.style.background=color;r.appendChild(s);}r.appendChild(document.createTextNode(t+(v===undefined?'':': '+fmt(v))));tip.appendChild(r);}
function hide(){tip.style.display='none';cur.setAttribute('visibility','hidden');}
svg.addEventListener('mouseleave',hide);
svg.addEventListener('mousemove',function(e){
var b=svg.getBoundingClientRect(),x=(e.clientX-b.left)*d.w/b.width;
if(x<d.left||x>d.right){hide();return;}
var lo=0,hi=d.cols.length-1;while(lo<hi){var m=(lo+hi+1)>>1;if(d.xs[m]<=x)lo=m;else hi=m-1;}
var c=d.cols[lo];tip.textContent='';
var h=document.createElement('b');h.textContent='event '+c[0].toLocaleString()+', iteration '+c[1]+', '+c[2];tip.appendChild(h);
row('allocated',null,c[3]);if(c[4]!==null)row('reserved',null,c[4]);
for(var k=d.cats.length-1;k>=0;k--)if(c[5][k])row(d.cats[k],d.colors[k],c[5][k]);
cur.setAttribute('x1',d.xs[lo]);cur.setAttribute('x2',d.xs[lo]);cur.setAttribute('visibility','visible');
tip.style.display='block';var px=(d.xs[lo]/d.w)*b.width;
tip.style.left=(px>b.width*0.6?px-tip.offsetWidth-12:px+12)+'px';tip.style.top=(e.clientY-b.top+8)+'px';});
})();"""
